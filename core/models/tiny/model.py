"""The textbook's minimal transformer classifier, trainable in PyTorch, with a numpy twin.

Words are the project's lower-cased `\\w+` tokens (core.text). Positional encoding can be switched
off; then the model cannot see word order: permuting the words permutes the token outputs and
leaves the pooled vector and the prediction unchanged. The model and tokenizer follow the
Hugging Face calling conventions, so the shared training loop and registry treat them alike.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from core.lab.self_attention import positional_encoding, softmax
from core.text import bag_key, word_spans, words

PAD, UNK, CLS = "[PAD]", "[UNK]", "[CLS]"
PAD_ID, UNK_ID, CLS_ID = 0, 1, 2
MODEL_TYPE = "tiny-transformer"
CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"
VOCAB_NAME, TOKENIZER_CONFIG_NAME = "vocab.json", "tokenizer_config.json"
POOLINGS = ("mean", "cls")


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class TinyConfig:
    """Shape and behaviour of the tiny classifier; saved as config.json."""

    model_type: ClassVar[str] = MODEL_TYPE

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_layers: int = 1
    max_length: int = 64  # positions the sinusoidal table covers; the tokenizer truncates to it
    positional_encoding: bool = True  # off: the model sees a bag of words (order-blind)
    pooling: str = "mean"  # "mean" over real tokens, or "cls": the output at position 0 ([CLS])
    dropout: float = 0.1
    num_labels: int = 2
    id2label: dict[int, str] = field(default_factory=dict)  # empty: LABEL_0, LABEL_1, ...
    label2id: dict[str, int] = field(default_factory=dict)  # empty: the inverse of id2label
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        self._check_sizes()
        id2label, label2id = _label_maps(self.id2label, self.label2id, self.num_labels)
        object.__setattr__(self, "id2label", id2label)  # keys normalised (JSON gives strings)
        object.__setattr__(self, "label2id", label2id)

    def __hash__(self) -> int:
        # The label maps are dicts, so the generated field hash would fail; hash the JSON form.
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def _check_sizes(self) -> None:
        positive = ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "max_length")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1; got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be 'mean' or 'cls'; got {self.pooling!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout}")
        if self.num_labels < 1:
            raise ValueError(f"num_labels must be at least 1; got {self.num_labels}")

    def to_dict(self) -> dict:
        """JSON-ready dictionary (label ids become strings, as in Hugging Face configs)."""
        data = asdict(self)
        data["id2label"] = {str(i): label for i, label in self.id2label.items()}
        return {"model_type": MODEL_TYPE, "architectures": [_MODEL_CLASS_NAME], **data}

    @classmethod
    def from_dict(cls, data: dict) -> TinyConfig:
        """Inverse of `to_dict`; extra keys (model_type, architectures) are ignored."""
        if data.get("model_type") != MODEL_TYPE:
            raise ValueError(
                f"config is not a {MODEL_TYPE} config (model_type {data.get('model_type')!r})"
            )
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


_MODEL_CLASS_NAME = "TinyTransformerForSequenceClassification"


def _label_maps(
    id2label: dict, label2id: dict, num_labels: int
) -> tuple[dict[int, str], dict[str, int]]:
    """Label maps with int ids and str labels; defaults LABEL_0.. and the inverse map."""
    id2label = {int(i): str(label) for i, label in id2label.items()} or {
        i: f"LABEL_{i}" for i in range(num_labels)
    }
    inverse = {label: i for i, label in id2label.items()}
    label2id = {str(k): int(v) for k, v in label2id.items()} or inverse
    if sorted(id2label) != list(range(num_labels)) or label2id != inverse:
        raise ValueError(
            f"id2label must map 0..{num_labels - 1} to distinct labels and label2id must be its "
            "inverse; pass label maps with num_labels entries"
        )
    return id2label, label2id


def is_tiny_model_dir(directory: str | Path) -> bool:
    """Whether `directory` holds a saved tiny transformer (config.json with its model_type)."""
    path = Path(directory) / CONFIG_NAME
    if not path.is_file():
        return False
    return json.loads(path.read_text(encoding="utf-8")).get("model_type") == MODEL_TYPE


# --------------------------------------------------------------------------- tokenizer


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
            raise ValueError(f"max_length must be at least 1; got {max_length}")
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
            raise ValueError(f"max_size must exceed {len(specials)} and min_freq be at least 1")
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
            raise ValueError(f"max_length must be at least 1; got {max_length}")
        return min(max_length or self.max_length, self.max_length)

    def encode(
        self, text: str, *, truncation: bool = True, max_length: int | None = None
    ) -> list[int]:
        """Ids of one text: [CLS] first when add_cls, then word ids, cut to the length limit."""
        ids = [self.vocab.get(w, UNK_ID) for w in words(text)]
        ids = ([CLS_ID] if self.add_cls else []) + ids
        limit = self._limit(truncation, max_length)
        return ids if limit is None else ids[:limit]

    def word_offsets(
        self, text: str, *, truncation: bool = True, max_length: int | None = None
    ) -> list[tuple[int, int]]:
        """Character span (start, end) in `text` of each position of `encode(text)`.

        [CLS] gets (0, 0), as special tokens do in Hugging Face's offset_mapping; use this to
        label attention maps with the original words (`text[start:end]`).
        """
        spans = [(s.start, s.end) for s in word_spans(text)]
        spans = ([(0, 0)] if self.add_cls else []) + spans
        limit = self._limit(truncation, max_length)
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
            raise ValueError("texts must be a string or a list of strings")
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
        raise ValueError(f"padding must be True, False, 'longest' or 'max_length'; got {padding!r}")

    def save_pretrained(self, directory: str | Path) -> None:
        """Write vocab.json and tokenizer_config.json into `directory` (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        _write_json(directory / VOCAB_NAME, self.vocab)
        settings = {
            "tokenizer_class": type(self).__name__,
            "add_cls": self.add_cls,
            "max_length": self.max_length,
            "lowercase": True,
            "word_pattern": r"\w+",
        }
        _write_json(directory / TOKENIZER_CONFIG_NAME, settings)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> TinyTokenizer:
        """Load a tokenizer written by `save_pretrained`."""
        vocab = _read_json(Path(directory) / VOCAB_NAME)
        settings = _read_json(Path(directory) / TOKENIZER_CONFIG_NAME)
        return cls(vocab, add_cls=bool(settings["add_cls"]), max_length=int(settings["max_length"]))


def _check_vocab(vocab: dict[str, int], *, add_cls: bool) -> None:
    expected = {PAD: PAD_ID, UNK: UNK_ID, **({CLS: CLS_ID} if add_cls else {})}
    if any(vocab.get(token) != i for token, i in expected.items()):
        raise ValueError(f"vocabulary must map {expected}; build it with TinyTokenizer.build")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError("vocabulary ids must be 0..size-1, each used once")


def _as_tensor(rows: list, return_tensors: str | None):
    if return_tensors is None:
        return rows
    if len({len(r) for r in rows}) > 1:
        raise ValueError("texts have different lengths; pass padding=True to return tensors")
    if return_tensors == "pt":
        return torch.tensor(rows, dtype=torch.long)
    if return_tensors == "np":
        return np.asarray(rows, dtype=np.int64)
    raise ValueError(f"return_tensors must be 'pt', 'np' or None; got {return_tensors!r}")


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise ValueError(f"{path} is missing; save the model with save_pretrained first")
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class TinyClassifierOutput:
    """What the forward pass returns.

    logits (batch, num_labels); loss: mean cross-entropy when labels were given; attentions: one
    (batch, heads, seq, seq) tensor per layer when asked; token_outputs (batch, seq, d_model): the
    last layer's output per position; pooled (batch, d_model): what the head reads.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    token_outputs: torch.Tensor | None = None
    pooled: torch.Tensor | None = None


class TinySelfAttention(nn.Module):
    """Multi-head self-attention with learned Q/K/V/O projections and a padding mask."""

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.n_heads, self.d_head = config.n_heads, config.d_model // config.n_heads
        self.query = nn.Linear(config.d_model, config.d_model)
        self.key = nn.Linear(config.d_model, config.d_model)
        self.value = nn.Linear(config.d_model, config.d_model)
        self.output = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.d_head).transpose(1, 2)  # (b, heads, n, d_head)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (b, n, d), attention_mask (b, n) → output (b, n, d), weights (b, heads, n, n)."""
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (b, heads, n, n)
        padding = attention_mask[:, None, None, :] == 0  # (b, 1, 1, n): keys nobody may attend to
        scores = scores.masked_fill(padding, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        context = self.dropout(weights) @ v  # (b, heads, n, d_head)
        context = context.transpose(1, 2).reshape(x.shape)  # (b, n, d)
        return self.output(context), weights


class TinyEncoderLayer(nn.Module):
    """Self-attention and a position-wise feed-forward, each wrapped in residual + LayerNorm."""

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.attention = TinySelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ff_in = nn.Linear(config.d_model, config.d_ff)
        self.ff_out = nn.Linear(config.d_ff, config.d_model)
        self.output_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (b, n, d) → (b, n, d) and the attention weights (b, heads, n, n)."""
        attended, weights = self.attention(x, attention_mask)
        x = self.attention_norm(x + self.dropout(attended))
        fed = self.ff_out(F.relu(self.ff_in(x)))  # (b, n, d_ff) → (b, n, d)
        return self.output_norm(x + self.dropout(fed)), weights


class TinyTransformerForSequenceClassification(nn.Module):
    """Embeddings (+ sinusoidal positions) → encoder layers → mean or [CLS] pooling → linear."""

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model, padding_idx=PAD_ID)
        table = torch.tensor(
            positional_encoding(config.max_length, config.d_model), dtype=torch.float32
        )
        # Not persistent: the table is a formula, not a weight, so it is not saved.
        self.register_buffer("positional", table, persistent=False)
        self.layers = nn.ModuleList(TinyEncoderLayer(config) for _ in range(config.n_layers))
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, config.num_labels)

    @property
    def device(self) -> torch.device:
        """Where the weights are."""
        return self.embeddings.weight.device

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(b, n) ids → (b, n, d) word embeddings plus positional encoding when switched on."""
        if input_ids.shape[1] > self.config.max_length:
            raise ValueError(
                f"sequence of {input_ids.shape[1]} tokens exceeds max_length "
                f"{self.config.max_length}; tokenize with truncation=True"
            )
        x = self.embeddings(input_ids)
        if self.config.positional_encoding:
            x = x + self.positional[: input_ids.shape[1]]
        return self.dropout(x)

    def pool(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(b, n, d) → (b, d): mean over real tokens, or the [CLS] position."""
        if self.config.pooling == "cls":
            return x[:, 0]
        mask = attention_mask.unsqueeze(-1).to(x.dtype)  # (b, n, 1)
        return (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> TinyClassifierOutput:
        """input_ids, attention_mask (b, n); labels (b,) → logits (b, num_labels) and more."""
        if attention_mask is None:
            attention_mask = (input_ids != PAD_ID).long()
        x = self.embed(input_ids)
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, attention_mask)
            attentions.append(weights)
        pooled = self.pool(x, attention_mask)
        logits = self.classifier(self.dropout(pooled))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return TinyClassifierOutput(
            logits, loss, tuple(attentions) if output_attentions else None, x, pooled
        )

    def save_pretrained(self, directory: str | Path) -> None:
        """Write config.json and model.safetensors into `directory` (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        _write_json(directory / CONFIG_NAME, self.config.to_dict())
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        save_file(tensors, str(directory / WEIGHTS_NAME), metadata={"format": "pt"})

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, *, device: str | torch.device = "cpu"
    ) -> TinyTransformerForSequenceClassification:
        """Load a model written by `save_pretrained`, in eval mode, on `device`."""
        config = TinyConfig.from_dict(_read_json(Path(directory) / CONFIG_NAME))
        weights_path = Path(directory) / WEIGHTS_NAME
        if not weights_path.is_file():
            raise ValueError(
                f"{weights_path} is missing; save the model with save_pretrained first"
            )
        model = cls(config)
        try:
            model.load_state_dict(load_file(str(weights_path), device="cpu"))
        except RuntimeError as error:
            raise ValueError(f"{weights_path} does not fit {config}: {error}") from error
        return model.to(device).eval()


def create_tiny_classifier(
    texts: Sequence[str],
    labels: Iterable[str],
    *,
    positional_encoding: bool = True,
    pooling: str = "mean",
    n_layers: int = 1,
    max_length: int = 64,
    dropout: float = 0.1,
    min_freq: int = 1,
    max_size: int = 20000,
    seed: int = 0,
) -> tuple[TinyTransformerForSequenceClassification, TinyTokenizer]:
    """A freshly initialised (seeded) tiny classifier and its tokenizer built from `texts`.

    `labels` are the training labels (or just the label set); they are sorted before ids are
    assigned. [CLS] is added to the vocabulary exactly when pooling is "cls".
    """
    tokenizer = TinyTokenizer.build(
        texts, min_freq=min_freq, max_size=max_size, add_cls=pooling == "cls", max_length=max_length
    )
    names = sorted(set(labels))
    config = TinyConfig(
        vocab_size=len(tokenizer),
        n_layers=n_layers,
        max_length=max_length,
        positional_encoding=positional_encoding,
        pooling=pooling,
        dropout=dropout,
        num_labels=len(names),
        id2label=dict(enumerate(names)),
    )
    with torch.random.fork_rng(devices=[]):  # seeded weights without touching the global RNG
        torch.manual_seed(seed)
        model = TinyTransformerForSequenceClassification(config)
    return model, tokenizer


def predict_proba(
    model: TinyTransformerForSequenceClassification,
    tokenizer: TinyTokenizer,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
) -> np.ndarray:
    """Softmax probabilities (n_texts, num_labels), batched; columns follow id2label."""
    if model.training:
        raise ValueError("call model.eval() before predicting (dropout is active in train mode)")
    rows = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(list(texts[start : start + batch_size])).to(model.device)
            rows.append(model(**batch).logits.float().softmax(dim=-1).cpu().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, model.config.num_labels))


# --------------------------------------------------------------------------- numpy reference


def numpy_params(model: nn.Module) -> dict[str, np.ndarray]:
    """The model's state_dict as float64 numpy arrays (the input of `reference_forward`)."""
    return {k: v.detach().cpu().double().numpy() for k, v in model.state_dict().items()}


def _np_layer_norm(
    params: dict[str, np.ndarray], name: str, x: np.ndarray, eps: float
) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)  # biased variance, as torch.nn.LayerNorm
    return (x - mean) / np.sqrt(var + eps) * params[f"{name}.weight"] + params[f"{name}.bias"]


def _np_linear(params: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]


def _np_attention(
    params: dict[str, np.ndarray], prefix: str, x: np.ndarray, mask: np.ndarray, heads: int
) -> np.ndarray:
    b, n, d = x.shape

    def split(name: str) -> np.ndarray:  # (b, n, d) → (b, heads, n, d_head)
        return (
            _np_linear(params, prefix + name, x)
            .reshape(b, n, heads, d // heads)
            .transpose(0, 2, 1, 3)
        )

    q, k, v = split("query"), split("key"), split("value")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // heads)  # (b, heads, n, n)
    scores = np.where(mask[:, None, None, :] == 0, np.finfo(scores.dtype).min, scores)
    context = (softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
    return _np_linear(params, prefix + "output", context)


def _np_encoder_layer(
    params: dict[str, np.ndarray], prefix: str, x: np.ndarray, mask: np.ndarray, config: TinyConfig
) -> np.ndarray:
    attended = _np_attention(params, prefix + "attention.", x, mask, config.n_heads)
    x = _np_layer_norm(params, prefix + "attention_norm", x + attended, config.layer_norm_eps)
    hidden = np.maximum(_np_linear(params, prefix + "ff_in", x), 0.0)  # ReLU, (b, n, d_ff)
    fed = _np_linear(params, prefix + "ff_out", hidden)
    return _np_layer_norm(params, prefix + "output_norm", x + fed, config.layer_norm_eps)


def reference_forward(
    params: dict[str, np.ndarray],
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    config: TinyConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The eval-mode forward pass in numpy alone, from `numpy_params(model)`.

    input_ids, attention_mask (b, n) → logits (b, num_labels), token_outputs (b, n, d_model),
    pooled (b, d_model).
    """
    input_ids, mask = np.asarray(input_ids), np.asarray(attention_mask)
    if input_ids.shape != mask.shape or input_ids.ndim != 2:
        raise ValueError("input_ids and attention_mask must both be (batch, seq) arrays")
    x = params["embeddings.weight"][input_ids]  # (b, n, d)
    if config.positional_encoding:
        x = x + positional_encoding(config.max_length, config.d_model)[: input_ids.shape[1]]
    for i in range(config.n_layers):
        x = _np_encoder_layer(params, f"layers.{i}.", x, mask, config)
    if config.pooling == "cls":
        pooled = x[:, 0]
    else:
        weights = mask[..., None].astype(x.dtype)
        pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
    return _np_linear(params, "classifier", pooled), x, pooled


# --------------------------------------------------------------------------- word-order demo


@dataclass(frozen=True)
class WordOrderDemo:
    """One untrained tiny model's view of some texts, with positional encoding on and off.

    pooled_on / pooled_off (n_texts, d_model) and probs_on / probs_off (n_texts, num_labels) come
    from the same weights; only the positional switch differs. spread_on / spread_off: the largest
    absolute difference of a pooled coordinate between any two texts (0 means identical).
    """

    texts: tuple[str, ...]
    pooled_on: np.ndarray
    pooled_off: np.ndarray
    probs_on: np.ndarray
    probs_off: np.ndarray
    spread_on: float
    spread_off: float

    @property
    def same_bag_of_words(self) -> bool:
        """Whether all texts have the same bag of words (only then can "off" coincide)."""
        return len({bag_key(text) for text in self.texts}) == 1

    @property
    def identical_off(self) -> bool:
        """Pooled vectors without positional encoding agree to float tolerance."""
        return self.spread_off < IDENTICAL_TOLERANCE

    @property
    def identical_on(self) -> bool:
        """Pooled vectors with positional encoding agree to float tolerance."""
        return self.spread_on < IDENTICAL_TOLERANCE

    @property
    def prob_spread_on(self) -> float:
        """Largest absolute difference of a class probability between two texts, encoding on."""
        return _spread(self.probs_on)

    @property
    def prob_spread_off(self) -> float:
        """Largest absolute difference of a class probability between two texts, encoding off."""
        return _spread(self.probs_off)


# float32 sums of the same vectors in another order differ by ~1e-7; real differences from
# positional encoding are orders of magnitude larger (~1e-2 for the untrained demo model).
IDENTICAL_TOLERANCE = 1e-5


def _spread(x: np.ndarray) -> float:
    """Largest absolute difference of one coordinate between any two rows of x (rows, dims)."""
    return float(np.abs(x[:, None, :] - x[None, :, :]).max())


def _pooled_and_probs(model, tokenizer, texts) -> tuple[np.ndarray, np.ndarray]:
    with torch.inference_mode():
        out = model(**tokenizer(list(texts)))
    return out.pooled.double().numpy(), out.logits.double().softmax(dim=-1).numpy()


def word_order_demo(texts: Sequence[str], *, seed: int = 0) -> WordOrderDemo:
    """Feed reorderings of one sentence (e.g. "India defeated Australia" both ways) to a seeded
    untrained tiny model with and without positional encoding; no training needed to see that
    without it the outputs coincide whenever the bags of words do."""
    if len(texts) < 2:
        raise ValueError("give at least two texts to compare")
    model, tokenizer = create_tiny_classifier(texts, ["A", "B"], dropout=0.0, seed=seed)
    off = TinyTransformerForSequenceClassification(replace(model.config, positional_encoding=False))
    off.load_state_dict(model.state_dict())
    pooled_on, probs_on = _pooled_and_probs(model.eval(), tokenizer, texts)
    pooled_off, probs_off = _pooled_and_probs(off.eval(), tokenizer, texts)
    return WordOrderDemo(
        tuple(texts),
        pooled_on,
        pooled_off,
        probs_on,
        probs_off,
        _spread(pooled_on),
        _spread(pooled_off),
    )
