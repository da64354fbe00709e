"""Where and how precisely torch runs: one `Runtime` (device and precision) per loaded model,
the rules that choose it, and CPU threads."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from core.errors import UserError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")
DeviceName = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16"]
# The operator's process-wide precision (auto, fp32 or bf16): what "auto" means wherever a
# runtime is resolved, so the app, the command line and tests can all be forced to one.
PRECISION_ENV = "GRIEVANCE_LENS_PRECISION"

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
        raise UserError(f"device must be one of {DEVICES}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device 'cuda' asked for but no CUDA GPU is visible; use 'auto' or 'cpu'")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@functools.cache  # the CPU does not change while the process runs
def cpu_has_fast_bf16() -> bool:
    """Whether this CPU has hardware bf16 matrix units (Linux /proc/cpuinfo flags)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return False
    flags = cpuinfo.read_text(encoding="utf-8", errors="replace").split()
    return any(flag in flags for flag in _FAST_BF16_FLAGS)


def resolve_precision(precision: str, device: torch.device) -> Literal["fp32", "bf16"]:
    """Pick "bf16" for "auto" on a CUDA GPU that supports it or on a CPU with fast bf16, else
    "fp32"; "fp32" and "bf16" are kept as asked."""
    if precision not in PRECISIONS:
        raise UserError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision  # type: ignore[return-value]
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


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


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """A bf16 autocast context for `precision == "bf16"`, else a no-op context."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


@dataclass(frozen=True)
class Runtime:
    """Where and how precisely one loaded model runs, decided once when it is loaded.

    Every consumer of the model (prediction, training validation, the quick recipe's embedding,
    explanation, probes) runs its forward passes on `device` under `autocast()`, so one complaint
    gets one answer on every page and on the command line. "bf16" is bf16 autocast (weights
    stay fp32); "fp32" is full precision.
    """

    device: torch.device
    precision: Literal["fp32", "bf16"]

    def __post_init__(self) -> None:
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"a runtime's precision is 'fp32' or 'bf16', got {self.precision!r}")

    @classmethod
    def resolve(cls, device: str | torch.device = "auto", precision: str = "auto") -> Runtime:
        """The runtime for a device ("auto": CUDA when available, "cpu", "cuda", or a
        torch.device) and a precision ("auto": GRIEVANCE_LENS_PRECISION when set, else bf16 on
        a CUDA GPU that supports it or a CPU with fast bf16, else fp32).

        Raises
        ------
        UserError
            For an unknown name or setting, or CUDA on a machine without a CUDA GPU.
        """
        chosen = device if isinstance(device, torch.device) else resolve_device(device)
        if chosen.type == "cuda" and not torch.cuda.is_available():
            resolve_device("cuda")  # raises its one-line refusal
        return cls(chosen, resolve_precision(operator_precision(precision), chosen))

    def autocast(self) -> AbstractContextManager:
        """The context every forward pass of this runtime's model runs in."""
        return autocast(self.device, self.precision)

    def describe(self) -> str:
        """For people: "cpu, bf16"."""
        return f"{self.device.type}, {self.precision}"

    def to_json(self) -> dict[str, str]:
        """`{device, precision}`, e.g. `{"device": "cpu", "precision": "bf16"}`."""
        return {"device": str(self.device), "precision": self.precision}


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
