"""Where and how precisely torch runs: device and precision choice, CPU threads."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Literal

import torch

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")
DeviceName = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16"]

# CPU flags that make bf16 matrix products fast (AMX tiles on recent Xeons, AVX-512 BF16 on
# Cooper Lake / Zen 4). Without them torch emulates bf16 and autocast is slower than fp32:
# on this project's AVX2-only EPYC dev machine bf16 inference ran at 0.16x fp32 (bench/).
_FAST_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def resolve_device(name: str) -> torch.device:
    """The torch device for "auto" (CUDA when available), "cpu" or "cuda".

    Raises
    ------
    ValueError
        For an unknown name, or "cuda" on a machine without a CUDA GPU.
    """
    if name not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for but no CUDA GPU is visible; use 'auto' or 'cpu'")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU has hardware bf16 matrix units (Linux /proc/cpuinfo flags)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return False
    flags = cpuinfo.read_text(encoding="utf-8", errors="replace").split()
    return any(flag in flags for flag in _FAST_BF16_FLAGS)


def resolve_precision(precision: str, device: torch.device) -> Literal["fp32", "bf16"]:
    """Pick "bf16" for "auto" on CUDA or on a CPU with fast bf16, else "fp32"."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision  # type: ignore[return-value]
    if device.type == "cuda" or cpu_has_fast_bf16():
        return "bf16"
    return "fp32"


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """A bf16 autocast context for `precision == "bf16"`, else a no-op context."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def available_cpus() -> int:
    """CPU cores this process may run on (respects taskset / container affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def configure_cpu_threads() -> int:
    """Cap torch's intra-op threads at the cores we may use; returns the thread count.

    torch defaults to the machine's physical cores, which oversubscribes a container or a
    taskset-limited process and makes every matmul slower, never faster.
    """
    threads = min(torch.get_num_threads(), available_cpus())
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return threads
