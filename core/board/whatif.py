"""The routing board's "what if": how many complaints would change desk, and how many breaches
would be avoided or caused, if the unsure ones went to their second choice or to people first.

A complaint breaches when its age plus the delay before it reaches its right desk exceeds that
desk's TAT. A complaint at a wrong desk loses `tat.reroute_hours` before it reaches the right one;
one sent to people first loses `tat.triage_hours` and then reaches the right desk. The right desk
is the reviewed desk where the file has one (counted), else the model's `prob_<desk>` columns
(expected values: the sum over desks of probability times outcome).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.board.tat import TatTable
from core.progress import check_cancel

AS_ROUTED = "as routed"
SECOND_CHOICE = "unsure to second choice"
PEOPLE_FIRST = "unsure to people first"
PROB_PREFIX = "prob_"


@dataclass(frozen=True)
class Scenario:
    """One routing: complaints that leave the desk they were routed to (for people first, every
    unsure one), breaches under it, and breaches avoided or caused against "as routed"."""

    name: str
    changed_desk: int
    breached: float
    avoided: float
    caused: float


@dataclass(frozen=True)
class WhatIf:
    """The scenarios ("as routed" first), what the right desk was taken from, and the rules."""

    basis: str
    scenarios: tuple[Scenario, ...]
    note: str


@dataclass(frozen=True)
class RoutingInputs:
    """Per open complaint (n rows): where it was routed, its age, whether the model was unsure,
    and what is known of its right desk."""

    routed: np.ndarray  # (n,) desk names
    age_hours: np.ndarray  # (n,) float, NaN without a received time
    unsure: np.ndarray  # (n,) bool
    probs: pd.DataFrame | None  # (n, k) prob_<desk> values, columns = desk names
    reviewed: np.ndarray | None  # (n,) reviewed desk or None
    reviewed_col: str | None


def prob_columns(columns: list[str]) -> dict[str, str]:
    """desk -> its `prob_<desk>` column, in the file's order."""
    return {c[len(PROB_PREFIX) :]: c for c in columns if c.startswith(PROB_PREFIX) and len(c) > 5}


def build_what_if(
    inputs: RoutingInputs, tat: TatTable, *, cancel: threading.Event | None = None
) -> WhatIf:
    """The scenarios for `inputs` (see the module docstring for the rules): (n, desks) tables,
    so the caller bounds the desks. Raises Cancelled (core.progress) between scenarios once
    `cancel` is set."""
    desks, right = _right_desks(inputs)
    check_cancel(cancel)
    hours = np.array([tat.hours_for(d) for d in desks], dtype=float)
    counted = ~np.isnan(inputs.age_hours) & (right.sum(axis=1) > 0)
    routed_at = _desk_index(inputs.routed, desks)
    base = _breaches(routed_at, inputs.age_hours, hours, tat.reroute_hours)
    scenarios = [_scenario(AS_ROUTED, base, base, right, counted, 0)]
    check_cancel(cancel)
    second = _second_choice(inputs, desks)
    if second is not None:
        moved = inputs.unsure & (second != routed_at)
        chosen = np.where(moved, second, routed_at)
        outcome = _breaches(chosen, inputs.age_hours, hours, tat.reroute_hours)
        scenarios.append(_scenario(SECOND_CHOICE, outcome, base, right, counted, moved.sum()))
    check_cancel(cancel)
    people = base.copy()
    late = (inputs.age_hours[:, None] + tat.triage_hours) > hours[None, :]
    people[inputs.unsure] = late[inputs.unsure]
    scenarios.append(_scenario(PEOPLE_FIRST, people, base, right, counted, inputs.unsure.sum()))
    return WhatIf(_basis(inputs, right), tuple(scenarios), _note(inputs, tat, counted))


def _right_desks(inputs: RoutingInputs) -> tuple[list[str], np.ndarray]:
    """Every desk that can occur, and (n, len(desks)) probabilities of each being the right
    one: one-hot for a reviewed desk, the prob_ row (normalised) otherwise, zeros if unknown."""
    reviewed = inputs.reviewed
    names = set(inputs.routed.tolist())
    names |= set(inputs.probs.columns) if inputs.probs is not None else set()
    names |= {r for r in reviewed if r is not None} if reviewed is not None else set()
    desks = sorted(names)
    right = np.zeros((len(inputs.routed), len(desks)))
    if inputs.probs is not None:
        values = inputs.probs.to_numpy(dtype=float)
        totals = values.sum(axis=1, keepdims=True)
        values = np.divide(values, totals, out=np.zeros_like(values), where=totals > 0)
        right[:, _desk_index(np.array(inputs.probs.columns, dtype=object), desks)] = values
    if reviewed is not None:
        known = np.array([r is not None for r in reviewed], dtype=bool)
        right[known] = 0.0
        right[known, _desk_index(reviewed[known], desks)] = 1.0
    return desks, right


def _desk_index(names: np.ndarray, desks: list[str]) -> np.ndarray:
    position = {d: i for i, d in enumerate(desks)}
    return np.array([position[n] for n in names], dtype=int)


def _breaches(at: np.ndarray, age: np.ndarray, hours: np.ndarray, reroute: float) -> np.ndarray:
    """(n, k) bool: breached if desk k is the right one and the complaint sits at desk `at`."""
    wrong = np.arange(len(hours))[None, :] != at[:, None]
    return (age[:, None] + np.where(wrong, reroute, 0.0)) > hours[None, :]


def _scenario(
    name: str,
    outcome: np.ndarray,
    base: np.ndarray,
    right: np.ndarray,
    counted: np.ndarray,
    changed: int,
) -> Scenario:
    weights = right[counted]

    def expected(mask: np.ndarray) -> float:
        return float((weights * mask[counted]).sum())

    return Scenario(
        name=name,
        changed_desk=int(changed),
        breached=expected(outcome),
        avoided=expected(base & ~outcome),
        caused=expected(~base & outcome),
    )


def _second_choice(inputs: RoutingInputs, desks: list[str]) -> np.ndarray | None:
    """(n,) index of the most probable desk other than the routed one; None without prob_."""
    if inputs.probs is None or inputs.probs.shape[1] < 2:
        return None
    values = inputs.probs.to_numpy(dtype=float).copy()
    columns = list(inputs.probs.columns)
    position = {c: i for i, c in enumerate(columns)}
    routed = np.array([position.get(r, -1) for r in inputs.routed], dtype=int)
    rows = np.flatnonzero(routed >= 0)
    values[rows, routed[rows]] = -np.inf  # never "change" to the desk it already has
    best = values.argmax(axis=1)  # first column on ties: the file's order
    return _desk_index(np.array(columns, dtype=object)[best], desks)


def _basis(inputs: RoutingInputs, right: np.ndarray) -> str:
    if inputs.reviewed is None:
        return "the model's probabilities"
    reviewed = sum(r is not None for r in inputs.reviewed)
    column = f"reviewed desk column {inputs.reviewed_col}"
    rest = int((right.sum(axis=1) > 0).sum()) - reviewed
    return (
        column if rest == 0 else f"{column} ({reviewed} rows), the model's probabilities for {rest}"
    )


def _note(inputs: RoutingInputs, tat: TatTable, counted: np.ndarray) -> str:
    skipped = len(counted) - int(counted.sum())
    left_out = (
        f" {skipped} open complaints without a received time or a known right desk are "
        "left out of the breach counts."
        if skipped
        else ""
    )
    return (
        "A complaint breaches when its age plus the delay before it reaches its right desk "
        f"exceeds that desk's turnaround; a wrong desk costs {tat.reroute_hours:g} h "
        f"(reroute_hours) and people first {tat.triage_hours:g} h (triage_hours), operating "
        "assumptions of the TAT file. The right desk is the reviewed one where the file has "
        "it, else the model's probabilities (expected counts)." + left_out
    )
