"""bench/machine.py: when a benchmark's figures count, and what its load line says."""

from __future__ import annotations

from bench.machine import MachineLoad, cores, quiet_limit, shows_figures


def _load(before: float, others: float, forced: bool = False) -> MachineLoad:
    return MachineLoad((before, 0.0, 0.0), (1.0, 0.0, 0.0), quiet_limit(), others, 60.0, forced)


def test_a_run_counts_only_on_a_quiet_machine_with_nobody_else_computing():
    assert _load(0.1, 0.0).quiet
    assert not _load(quiet_limit() + 0.1, 0.0).quiet  # busy before it started
    assert not _load(0.1, cores() * 0.25 + 0.1).quiet  # someone computed while it ran
    assert "BUSY" in _load(0.1, 1.0).line() and "quiet" in _load(0.1, 0.0).line()


def test_busy_figures_are_shown_only_when_forced():
    assert shows_figures(_load(0.1, 0.0))
    assert not shows_figures(_load(3.0, 1.5))
    assert shows_figures(_load(3.0, 1.5, forced=True))
