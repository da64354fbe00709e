"""What a weights file holds, read from its safetensors header alone (no tensor, no torch), so
a config can be checked against the weights before a model of that size is built."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from core.errors import UserError

# The safetensors library refuses headers over 100 MB; a real header is a few kB per tensor.
MAX_HEADER_BYTES = 100_000_000
# A config may promise at most this many times the parameters its weight files hold (fp16 files
# load as fp32: 2x; tied or buffer tensors add a little) before it is refused as absurd.
MAX_CONFIG_OVER_WEIGHTS = 4
DTYPE_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
    "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}  # fmt: skip


def read_safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} from the header of the safetensors file `path`.

    Raises UserError in one line when the header is missing, too large, not JSON, or names a
    tensor whose bytes lie beyond the end of the file.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise UserError(f"{path.name} is not a safetensors file; save the model again")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise UserError(f"{path.name} has a bad header length; save the model again")
        header = _parse_header(path, handle.read(length))
    return _shapes(path, header, size - 8 - length)


def _parse_header(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path.name} has a header that is not JSON; save again") from err
    if not isinstance(header, dict):
        raise UserError(f"{path.name} has a header that is not a table; save the model again")
    header.pop("__metadata__", None)
    return header


def _shapes(path: Path, header: dict[str, Any], data_bytes: int) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for name, entry in header.items():
        try:
            shape = tuple(int(n) for n in entry["shape"])
            begin, end = (int(n) for n in entry["data_offsets"])
            width = DTYPE_BYTES[entry["dtype"]]
        except (TypeError, KeyError, ValueError) as err:
            raise UserError(f"{path.name}: tensor {name!r} has a bad header entry") from err
        # The shape must account for exactly the bytes it points at, inside the file.
        if not 0 <= begin <= end <= data_bytes or math.prod(shape) * width != end - begin:
            raise UserError(f"{path.name}: tensor {name!r} does not match its bytes in the file")
        shapes[name] = shape
    return shapes


def count_parameters(shapes: dict[str, tuple[int, ...]]) -> int:
    """Number of values in all tensors of a header."""
    return sum(math.prod(shape) for shape in shapes.values())


def check_config_fits_weights(folder: Path) -> None:
    """Refuse a transformers folder whose config.json promises a model far larger than its
    safetensors files hold (transformers would allocate it before reading any weight).

    The estimate covers the usual encoder fields (vocab, positions, layers, hidden and
    intermediate sizes); fields a config lacks count as 0. Folders without safetensors files
    are left to transformers, which refuses them (use_safetensors=True).
    """
    files = sorted(folder.glob("*.safetensors"))
    config_path = folder / "config.json"
    if not files or not config_path.is_file():
        return
    config = json.loads(config_path.read_text(encoding="utf-8"))
    held = sum(count_parameters(read_safetensors_shapes(f)) for f in files)
    promised = _estimated_parameters(config if isinstance(config, dict) else {})
    if promised > MAX_CONFIG_OVER_WEIGHTS * held + 1_000_000:
        raise UserError(
            f"refusing to load {folder.name}: config.json describes about {promised:,} "
            f"parameters but the weights hold {held:,}; the folder is damaged or crafted"
        )


def _estimated_parameters(config: dict[str, Any]) -> int:
    def size(key: str) -> int:
        value = config.get(key, 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    hidden = size("hidden_size") or size("d_model") or size("dim")
    inner = size("intermediate_size") or size("ffn_dim") or size("hidden_dim")
    layers = size("num_hidden_layers") or size("n_layers") or size("num_layers")
    embeddings = (size("vocab_size") + size("max_position_embeddings")) * hidden
    return embeddings + layers * (4 * hidden * hidden + 2 * hidden * inner)
