"""The process-wide caches of results of what visitors type, each bounded by the bytes it holds
(core.memo), so that neither long texts nor large attention maps can grow the server's memory:
explanations, probe results, positional ablations and masked display texts. Keys hold the text
itself (the content), the model's key and the settings. The budgets and the worst case of each
are in the README's limits table."""

from __future__ import annotations

from core.memo import MB, ByteBoundedCache

# An explanation of MiniLM at 128 word pieces is about 5 MB (6 layers x 12 heads x 128 x 128
# float32 attention weights); 256 MB keeps about fifty. One larger than the budget (a 12-layer
# model at 512 word pieces: 150 MB) is shown but not kept.
EXPLANATIONS = ByteBoundedCache(256 * MB, name="the explanation cache")
# A probe result holds its text and at most a few dozen rewrites of it (20,000 characters each
# at most): under 4 MB.
PROBES = ByteBoundedCache(64 * MB, name="the probe cache")
# A positional ablation: a few predictions per text, and the text.
ABLATIONS = ByteBoundedCache(16 * MB, name="the ablation cache")
# Bag-of-words evaluations of the Data page by (data set fingerprint, settings): a report and a
# confusion matrix each, a few kilobytes.
BOW_EVALUATIONS = ByteBoundedCache(16 * MB, name="the bag-of-words cache")
# Masked display text by original text: tables of complaints are masked once, then looked up on
# each rerun (every widget click).
MASKED_TEXTS = ByteBoundedCache(64 * MB, name="the masked text cache")
