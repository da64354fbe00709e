"""What this machine and its operator allow, read without importing torch: the device and
precision names, the operator's precision, whether the CPU has fast bf16, whether an NVIDIA GPU
is visible, and the cores this process may use.

The serving path (core.models.serving) decides where a saved model runs from these alone, so
routing a file never pays torch's import unless torch is what runs it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from core.errors import UserError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")
# What routing may ask for: torch's precisions, and "int8", the int8 serving graph
# (core.models.serving).
SERVING_PRECISIONS = (*PRECISIONS, "int8")
DeviceName = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16"]
# The operator's process-wide precision (auto, fp32 or bf16): what "auto" means wherever a
# runtime is resolved, so the app, the command line and tests can all be forced to one.
PRECISION_ENV = "GRIEVANCE_LENS_PRECISION"

# CPU flags that make bf16 matrix products fast (AMX tiles on recent Xeons, AVX-512 BF16 on
# Cooper Lake / Zen 4). Without them torch emulates bf16 and autocast is slower than fp32:
# on this project's AVX2-only EPYC dev machine bf16 inference ran at 0.16x fp32 (bench/).
_FAST_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the driver sees


def check_device_name(name: str) -> str:
    """`name` if it is one of DEVICES; UserError otherwise."""
    if name not in DEVICES:
        raise UserError(f"device must be one of {DEVICES}, got {name!r}")
    return name


@functools.cache  # the CPU does not change while the process runs
def cpu_has_fast_bf16() -> bool:
    """Whether this CPU has hardware bf16 matrix units (Linux /proc/cpuinfo flags)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return False
    flags = cpuinfo.read_text(encoding="utf-8", errors="replace").split()
    return any(flag in flags for flag in _FAST_BF16_FLAGS)


def nvidia_gpu_visible(environ: Mapping[str, str] | None = None) -> bool:
    """Whether an NVIDIA GPU is there for this process, without importing torch: the driver
    lists one and CUDA_VISIBLE_DEVICES does not hide them all. `device="auto"` runs torch on
    CUDA when this is true (torch itself has the last word)."""
    env = os.environ if environ is None else environ
    hidden = env.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        return False
    return _NVIDIA_GPUS.is_dir() and any(_NVIDIA_GPUS.iterdir())


def operator_precision(precision: str, environ: Mapping[str, str] | None = None) -> str:
    """`precision`, except that "auto" becomes the operator's GRIEVANCE_LENS_PRECISION when it is
    set (`environ` defaults to `os.environ`); an explicit "fp32" or "bf16" always wins."""
    if precision != "auto":
        return precision
    env = os.environ if environ is None else environ
    value = env.get(PRECISION_ENV, "").strip().lower() or "auto"
    if value not in PRECISIONS:
        raise UserError(f"{PRECISION_ENV} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


def available_cpus() -> int:
    """CPU cores this process may run on (respects taskset / container affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
