"""Which word pieces of a long text the model reads: its head, or its head and its tail.

A text longer than `max_length` word pieces must lose some. "head" keeps the first ones (the
tokenizer's own truncation). "head_tail" keeps the first HEAD_PIECES and the last ones, up to
`max_length` with [CLS] and [SEP]: a complaint often names its product at the start and says
what went wrong, or what it wants, at the end. Measured on the validation rows of the CFPB
sample (a quarter of its narratives are longer than 128 word pieces) and of the demo data, it
tied "head" (BENCHMARKS.md, "Engine v2"), so "head" stays the default and "head_tail" is an
option (`--truncation head_tail`). Only Hugging Face tokenizers (with [CLS] and [SEP]) read
heads and tails; the tiny transformer's word tokenizer keeps the head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.checks import check_texts
from core.data.privacy import mask_texts
from core.text import cut_for_tokens, token_char_cap

HEAD, HEAD_TAIL = "head", "head_tail"
TRUNCATIONS = (HEAD, HEAD_TAIL)
HEAD_PIECES = 64  # of 126 word pieces at max_length 128: the other 62 come from the end


def head_pieces(max_length: int) -> int:
    """Word pieces kept from the start: HEAD_PIECES, or about half of a shorter max_length."""
    return min(HEAD_PIECES, (max_length - 2) // 2 + 1)


@dataclass(frozen=True)
class Pieces:
    """One text as the model reads it: ids with [CLS] and [SEP], each piece's character span
    in the text ((0, 0) for the special tokens), and which pieces are special."""

    ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]
    special: tuple[bool, ...]


def cut_text(text: str, max_length: int, truncation: str) -> str:
    """The part of `text` the tokenizer needs to see: its start ("head"), or its start and its
    end ("head_tail"); each part holds far more than the pieces kept (core.text)."""
    if truncation == HEAD:
        return cut_for_tokens(text, max_length)
    cap = token_char_cap(max_length)
    return text if len(text) <= 2 * cap else text[:cap] + text[-cap:]


def texts_as_read(texts: Sequence[str], max_length: int, truncation: str) -> list[str]:
    """Each text as the model reads it, in every runtime: checked, cut to what the tokenizer
    needs (`cut_text`), then personal data masked, as training masked it. Cut first: masking a
    10 MB complaint would scan text the model never reads."""
    return mask_texts([
        cut_text(t, max_length, truncation) for t in check_texts(texts, allow_empty=True)
    ])  # fmt: skip


def head_tail_pieces(tokenizer: Any, texts: Sequence[str], max_length: int) -> list[Pieces]:
    """Each text's first `head_pieces` word pieces and its last ones, `max_length` in all with
    [CLS] and [SEP]; a text that fits is read whole. Offsets index the texts as given.

    The start and the end of a long text are tokenised apart (at most `token_char_cap`
    characters each), so a 10 MB complaint costs what a short one does.
    """
    room = max_length - 2
    cap = token_char_cap(max_length)
    tail_starts = [max(min(len(t), cap), len(t) - cap) for t in texts]
    parts = {
        "head": tokenizer(
            [t[:cap] for t in texts],
            add_special_tokens=False,
            return_offsets_mapping=True,
            verbose=False,
        ),
        "tail": tokenizer(
            [t[s:] for t, s in zip(texts, tail_starts, strict=True)],
            add_special_tokens=False,
            return_offsets_mapping=True,
            verbose=False,
        ),
    }  # fmt: skip  (verbose: the pieces are cut below, so "longer than 512" does not apply)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    read = []
    for i, start in enumerate(tail_starts):
        ids = [*parts["head"]["input_ids"][i], *parts["tail"]["input_ids"][i]]
        shifted = [(a + start, b + start) for a, b in parts["tail"]["offset_mapping"][i]]
        offsets = [*map(tuple, parts["head"]["offset_mapping"][i]), *shifted]
        if len(ids) > room:
            head = head_pieces(max_length)
            keep = [*range(head), *range(len(ids) - (room - head), len(ids))]
            ids, offsets = [ids[k] for k in keep], [offsets[k] for k in keep]
        read.append(Pieces(
            ids=(cls, *ids, sep), offsets=((0, 0), *offsets, (0, 0)),
            special=(True, *([False] * len(ids)), True),
        ))  # fmt: skip
    return read


def reads_head_and_tail(tokenizer: Any, truncation: str) -> bool:
    """Whether `tokenizer` reads texts by "head_tail": a Hugging Face tokenizer with [CLS] and
    [SEP] (the tiny transformer's word tokenizer always keeps the head)."""
    return (
        truncation == HEAD_TAIL
        and getattr(tokenizer, "is_fast", False)
        and getattr(tokenizer, "cls_token_id", None) is not None
        and getattr(tokenizer, "sep_token_id", None) is not None
    )
