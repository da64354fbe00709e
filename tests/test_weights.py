"""core.models.weights: safetensors headers read without tensors; configs checked against them."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from core.models.weights import (
    check_config_fits_weights,
    count_parameters,
    read_safetensors_shapes,
)


def _weights(folder: Path) -> Path:
    path = folder / "model.safetensors"
    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5, dtype=torch.float16)}, str(path))
    return path


def test_shapes_come_from_the_header(tmp_path):
    shapes = read_safetensors_shapes(_weights(tmp_path))
    assert shapes == {"a": (3, 4), "b": (5,)}
    assert count_parameters(shapes) == 17


def _with_header(path: Path, header: dict, data: bytes = b"\0" * 8) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"a": {"dtype": "F32", "shape": [10**9, 10**9], "data_offsets": [0, 8]}}, "its bytes"),
        ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, "its bytes"),
        ({"a": {"dtype": "XX", "shape": [2], "data_offsets": [0, 8]}}, "bad header entry"),
        ({"a": {"shape": [2]}}, "bad header entry"),
    ],
)
def test_a_header_that_lies_about_its_bytes_is_refused(tmp_path, header, message):
    with pytest.raises(ValueError, match=message):
        read_safetensors_shapes(_with_header(tmp_path / "x.safetensors", header))


def test_a_header_length_beyond_the_file_is_refused(tmp_path):
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(ValueError, match="bad header length"):
        read_safetensors_shapes(path)
    path.write_bytes(b"abc")
    with pytest.raises(ValueError, match="not a safetensors file"):
        read_safetensors_shapes(path)


def test_a_config_promising_more_than_the_weights_hold_is_refused(tiny_bert_dir, tmp_path):
    check_config_fits_weights(tiny_bert_dir)  # the real config fits
    config = json.loads((tiny_bert_dir / "config.json").read_text(encoding="utf-8"))
    (tmp_path / "model.safetensors").write_bytes((tiny_bert_dir / "model.safetensors").read_bytes())
    crafted = {**config, "vocab_size": 50_000_000, "hidden_size": 4096}  # 800 GB of embeddings
    (tmp_path / "config.json").write_text(json.dumps(crafted), encoding="utf-8")
    with pytest.raises(ValueError, match="describes about"):
        check_config_fits_weights(tmp_path)
