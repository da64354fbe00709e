"""How much the shared server's job queue (core.jobs) does at once and the caps on each job:
one frozen configuration, with its defaults changed from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from core.errors import UserError


@dataclass(frozen=True)
class QueueConfig:
    """How much the shared server does at once, and the caps on each job."""

    # Heavy CPU jobs at once; 0: one per two cores (a torch job already uses two threads), so a
    # 2-core machine runs one. More only oversubscribes the cores and slows every job down.
    cpu_workers: int = 0
    gpu_workers: int = 0  # 0: one per visible CUDA GPU (none on a CPU-only machine)
    # Short tasks at once. Two, with one running per user, so that one user's slow request
    # never holds the lane for everyone else.
    short_workers: int = 2
    max_short_per_user: int = 1  # short tasks running at once per user (more wait their turn)
    max_jobs_per_user: int = 3  # heavy jobs queued or running, per user
    max_job_seconds: float = 4 * 3600.0  # wall-clock cap of one job (a task may set less)
    # Batch size × max length of one forward pass: 64 × 512. Bounds a job's activation memory.
    max_tokens_per_batch: int = 64 * 512
    heavy_nice: int = 10  # heavy workers' own thread priority: interactive work goes first
    finished_kept: int = 200  # finished jobs listed on the Jobs page (as summaries)

    def __post_init__(self) -> None:
        for name in ("cpu_workers", "gpu_workers", "short_workers"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise UserError(f"{name} must be an integer >= 0, got {getattr(self, name)!r}")
        if self.short_workers < 2:
            raise UserError("short_workers must be at least 2, so one request cannot hold it")
        minimums = ("max_short_per_user", "max_jobs_per_user", "max_tokens_per_batch")
        if any(getattr(self, name) < 1 for name in minimums):
            raise UserError(f"{', '.join(minimums)} must be >= 1")
        if not self.max_job_seconds > 0:
            raise UserError(f"max_job_seconds must be > 0, got {self.max_job_seconds!r}")
        if not 0 <= self.heavy_nice <= 19:
            raise UserError(f"heavy_nice must be in 0..19, got {self.heavy_nice!r}")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> QueueConfig:
        """The defaults, changed by GRIEVANCE_LENS_CPU_WORKERS, _SHORT_WORKERS,
        _MAX_JOBS_PER_USER, _MAX_JOB_SECONDS and _MAX_TOKENS_PER_BATCH where set."""
        env = os.environ if environ is None else environ
        fields = {
            "cpu_workers": ("GRIEVANCE_LENS_CPU_WORKERS", int),
            "short_workers": ("GRIEVANCE_LENS_SHORT_WORKERS", int),
            "max_jobs_per_user": ("GRIEVANCE_LENS_MAX_JOBS_PER_USER", int),
            "max_job_seconds": ("GRIEVANCE_LENS_MAX_JOB_SECONDS", float),
            "max_tokens_per_batch": ("GRIEVANCE_LENS_MAX_TOKENS_PER_BATCH", int),
        }
        values: dict[str, Any] = {}
        for name, (variable, kind) in fields.items():
            if env.get(variable, "").strip():
                try:
                    values[name] = kind(env[variable])
                except ValueError:
                    raise UserError(f"{variable} must be a number, got {env[variable]!r}") from None
        return cls(**values)
