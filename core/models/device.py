"""Where and how precisely torch runs: one `Runtime` (device and precision) per loaded model,
the rules that choose it, and CPU threads."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Literal

import torch

from core.errors import UserError
from core.models.hardware import (  # the names and rules that need no torch; kept importable here
    DEVICES,
    PRECISION_ENV,
    PRECISIONS,
    DeviceName,
    Precision,
    available_cpus,
    check_device_name,
    cpu_has_fast_bf16,
    operator_precision,
)

__all__ = [
    "DEVICES", "PRECISIONS", "PRECISION_ENV", "DeviceName", "Precision", "Runtime",
    "autocast", "available_cpus", "configure_cpu_threads", "cpu_has_fast_bf16",
    "operator_precision", "resolve_device", "resolve_precision",
]  # fmt: skip


def resolve_device(name: str) -> torch.device:
    """The torch device for "auto" (CUDA when available), "cpu" or "cuda".

    Raises
    ------
    ValueError
        For an unknown name, or "cuda" on a machine without a CUDA GPU.
    """
    check_device_name(name)
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device 'cuda' asked for but no CUDA GPU is visible; use 'auto' or 'cpu'")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


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


def configure_cpu_threads() -> int:
    """Cap torch's intra-op threads at the cores we may use; returns the thread count.

    torch defaults to the machine's physical cores, which oversubscribes a container or a
    taskset-limited process and makes every matmul slower, never faster.
    """
    threads = min(torch.get_num_threads(), available_cpus())
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return threads
