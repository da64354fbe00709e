"""The tiny transformer's word-level tokenizer: the project's lower-cased `\\w+` words (core.text)
to ids, with Hugging Face calling conventions (padding, truncation, offsets, save and load)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from core.errors import UserError
from core.models.scratch import read_saved_json
from core.paths import write_json
from core.text import cut_for_tokens, word_spans, words

PAD, UNK, CLS = "[PAD]", "[UNK]", "[CLS]"
PAD_ID, UNK_ID, CLS_ID = 0, 1, 2
VOCAB_NAME, TOKENIZER_CONFIG_NAME = "vocab.json", "tokenizer_config.json"


class TinyEncoding(dict):
    """A batch of encoded texts: input_ids, attention_mask (and offset_mapping when asked).

    A dict, like Hugging Face's BatchEncoding: `model(**encoding)` works, and so do attribute
    access (`encoding.input_ids`) and `encoding.to(device)`.
    """

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError as error:
            raise AttributeError(name) from error

    def to(self, device: str | torch.device) -> TinyEncoding:
        """A copy with every tensor moved to `device`."""
        return TinyEncoding(
            {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.items()}
        )


class TinyTokenizer:
    """Word-level tokenizer: lower-cased `\\w+` words to ids; 0 = [PAD], 1 = [UNK], 2 = [CLS].

    [CLS] exists only when `add_cls` is set; then every sequence starts with it.
    """

    pad_token_id: ClassVar[int] = PAD_ID
    unk_token_id: ClassVar[int] = UNK_ID

    def __init__(self, vocab: dict[str, int], *, add_cls: bool = False, max_length: int = 64):
        _check_vocab(vocab, add_cls=add_cls)
        if max_length < 1:
            raise UserError(f"max_length must be at least 1; got {max_length}")
        self.vocab = dict(vocab)
        self.add_cls = add_cls
        self.max_length = max_length
        self._id_to_token = sorted(self.vocab, key=self.vocab.__getitem__)

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        min_freq: int = 1,
        max_size: int = 20000,
        add_cls: bool = False,
        max_length: int = 64,
    ) -> TinyTokenizer:
        """Vocabulary of the words of `texts` seen at least `min_freq` times.

        `max_size` caps the whole vocabulary, special tokens included; the most frequent words
        are kept (ties broken alphabetically, so the result is deterministic).
        """
        specials = [PAD, UNK, CLS] if add_cls else [PAD, UNK]
        if max_size <= len(specials) or min_freq < 1:
            raise UserError(f"max_size must exceed {len(specials)} and min_freq be at least 1")
        counts = Counter(w for text in texts for w in words(text))
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w)
        )
        kept = specials + ranked[: max_size - len(specials)]
        return cls({w: i for i, w in enumerate(kept)}, add_cls=add_cls, max_length=max_length)

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included (the model's embedding rows)."""
        return len(self.vocab)

    @property
    def model_max_length(self) -> int:
        """Longest sequence produced with truncation (Hugging Face's name for it)."""
        return self.max_length

    @property
    def cls_token_id(self) -> int | None:
        """Id of [CLS], or None when this tokenizer adds none."""
        return CLS_ID if self.add_cls else None

    def tokenize(self, text: str) -> list[str]:
        """The words of `text` as the model sees them (lower-cased, no special tokens)."""
        return words(text)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Token strings for ids (unknown words come back as [UNK])."""
        return [self._id_to_token[int(i)] for i in ids]

    def _limit(self, truncation: bool, max_length: int | None) -> int | None:
        return self._cap(max_length) if truncation else None

    def _cap(self, max_length: int | None) -> int:
        """The requested length, at most the tokenizer's own (the model has no more positions)."""
        if max_length is not None and max_length < 1:
            raise UserError(f"max_length must be at least 1; got {max_length}")
        return min(max_length or self.max_length, self.max_length)

    def encode(
        self, text: str, *, truncation: bool = True, max_length: int | None = None
    ) -> list[int]:
        """Ids of one text: [CLS] first when add_cls, then word ids, cut to the length limit."""
        limit = self._limit(truncation, max_length)
        if limit is not None:  # words beyond the cap could never be kept
            text = cut_for_tokens(text, limit)
        ids = [self.vocab.get(w, UNK_ID) for w in words(text)]
        ids = ([CLS_ID] if self.add_cls else []) + ids
        return ids if limit is None else ids[:limit]

    def word_offsets(
        self, text: str, *, truncation: bool = True, max_length: int | None = None
    ) -> list[tuple[int, int]]:
        """Character span (start, end) in `text` of each position of `encode(text)`.

        [CLS] gets (0, 0), as special tokens do in Hugging Face's offset_mapping; use this to
        label attention maps with the original words (`text[start:end]`).
        """
        limit = self._limit(truncation, max_length)
        if limit is not None:
            text = cut_for_tokens(text, limit)
        spans = [(s.start, s.end) for s in word_spans(text)]
        spans = ([(0, 0)] if self.add_cls else []) + spans
        return spans if limit is None else spans[:limit]

    def __call__(
        self,
        texts: str | Sequence[str],
        *,
        padding: bool | str = True,
        truncation: bool = True,
        max_length: int | None = None,
        return_tensors: str | None = "pt",
        return_offsets_mapping: bool = False,
    ) -> TinyEncoding:
        """Encode a batch: input_ids and attention_mask, each (batch, seq).

        padding: True / "longest" pads to the longest text of the batch (dynamic padding),
        "max_length" to the length limit, False not at all. Sequences are cut to `max_length`
        when `truncation`; a max_length above the tokenizer's own is capped to it.
        return_tensors: "pt", "np" or None (lists).
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise UserError("texts must be a string or a list of strings")
        ids = [self.encode(t, truncation=truncation, max_length=max_length) for t in texts]
        width = self._padded_width(ids, padding, max_length)
        encoding = {
            "input_ids": [seq + [PAD_ID] * (width - len(seq)) for seq in ids],
            "attention_mask": [[1] * len(seq) + [0] * (width - len(seq)) for seq in ids],
        }
        if return_offsets_mapping:
            offsets = [
                self.word_offsets(t, truncation=truncation, max_length=max_length) for t in texts
            ]
            encoding["offset_mapping"] = [o + [(0, 0)] * (width - len(o)) for o in offsets]
        return TinyEncoding({k: _as_tensor(v, return_tensors) for k, v in encoding.items()})

    def _padded_width(
        self, ids: list[list[int]], padding: bool | str, max_length: int | None
    ) -> int:
        longest = max((len(seq) for seq in ids), default=0)
        if padding == "max_length":
            return max(longest, self._cap(max_length))
        if padding in (True, "longest"):
            return max(longest, 1)  # at least one column: a batch of empty texts is still (b, 1)
        if padding is False or padding == "do_not_pad":
            return 0
        raise UserError(f"padding must be True, False, 'longest' or 'max_length'; got {padding!r}")

    def save_pretrained(self, directory: str | Path) -> None:
        """Write vocab.json and tokenizer_config.json into `directory` (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / VOCAB_NAME, self.vocab)
        settings = {
            "tokenizer_class": type(self).__name__,
            "add_cls": self.add_cls,
            "max_length": self.max_length,
            "lowercase": True,
            "word_pattern": r"\w+",
        }
        write_json(directory / TOKENIZER_CONFIG_NAME, settings)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> TinyTokenizer:
        """Load a tokenizer written by `save_pretrained`."""
        vocab = read_saved_json(directory, VOCAB_NAME)
        settings = read_saved_json(directory, TOKENIZER_CONFIG_NAME)
        return cls(vocab, add_cls=bool(settings["add_cls"]), max_length=int(settings["max_length"]))


def _check_vocab(vocab: dict[str, int], *, add_cls: bool) -> None:
    expected = {PAD: PAD_ID, UNK: UNK_ID, **({CLS: CLS_ID} if add_cls else {})}
    if any(vocab.get(token) != i for token, i in expected.items()):
        raise UserError(f"vocabulary must map {expected}; build it with TinyTokenizer.build")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise UserError("vocabulary ids must be 0..size-1, each used once")


def _as_tensor(rows: list, return_tensors: str | None):
    if return_tensors is None:
        return rows
    if len({len(r) for r in rows}) > 1:
        raise UserError("texts have different lengths; pass padding=True to return tensors")
    if return_tensors == "pt":
        return torch.tensor(rows, dtype=torch.long)
    if return_tensors == "np":
        return np.asarray(rows, dtype=np.int64)
    raise UserError(f"return_tensors must be 'pt', 'np' or None; got {return_tensors!r}")
