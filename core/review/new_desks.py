"""A reviewer's decision on a candidate desk (core.tasks.discovery): name it as a new desk,
assign it to a desk the model knows, or dismiss it. Naming and assigning are one verdict on
every member the reviewer kept, recorded with the decision's trail event in one transaction
(`Store.decide_group`): each member's verdict is an ordinary triage verdict, so "retrain from
corrections" adds the members as labelled rows (a named desk becomes a desk of the challenger)
and the intake's updates feed tells the bank's system of each inbox complaint's new desk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.access import Actor, Permission
from core.errors import UserError
from core.review.records import TriageItem
from core.review.store import Store, append_event, utc_now
from core.tasks.discovery import DiscoveryRun, Member

NAME, ASSIGN, DISMISS = "name", "assign", "dismiss"
ACTIONS = {NAME: "discovery.named", ASSIGN: "discovery.assigned", DISMISS: "discovery.dismissed"}
MAX_DESK_CHARS = 64


@dataclass(frozen=True)
class CandidateDecision:
    """What a reviewer decided on candidate `candidate_id` of a run: NAME (a new desk called
    `desk`), ASSIGN (to the known desk `desk`) or DISMISS; `removed` are members (positions in
    the run) the reviewer took out first, which the decision leaves as they were."""

    candidate_id: str
    kind: str
    desk: str | None = None
    removed: tuple[int, ...] = ()


@dataclass(frozen=True)
class DecisionRecord:
    """What a decision changed: the members given the desk, and those already decided."""

    desk: str | None
    decided: tuple[int, ...]  # triage item ids given the verdict
    skipped: int  # inbox members a reviewer had decided already (their verdict stands)


def decide_candidate(
    store: Store,
    run: DiscoveryRun,
    decision: CandidateDecision,
    *,
    known_desks: Sequence[str],
    reviewer: str,
    actor: Actor,
) -> DecisionRecord:
    """Record `decision` (the actor needs DECIDE; signed in, `reviewer` is the actor): one
    verdict on each kept member and the trail event "discovery.named", "discovery.assigned"
    or "discovery.dismissed", naming the candidate, its words, the desk and the run's source."""
    actor.require(Permission.DECIDE)
    if decision.kind not in ACTIONS:
        raise UserError(f"a decision is one of {', '.join(ACTIONS)}, got {decision.kind!r}")
    candidate = run.discovery.candidate(decision.candidate_id)
    unknown = set(decision.removed) - set(candidate.members)
    if unknown:
        raise UserError(f"{len(unknown)} removed complaints are not members of {candidate.id}")
    kept = [i for i in candidate.members if i not in set(decision.removed)]
    details = {
        "candidate": candidate.id, "words": list(candidate.words), "source": run.source,
        "model": run.model, "members": len(kept), "removed": len(decision.removed),
    }  # fmt: skip
    if decision.kind == DISMISS:
        with store.transaction() as conn:
            append_event(conn, ACTIONS[DISMISS], None, reviewer, details, utc_now())
        return DecisionRecord(None, (), 0)
    desk = _checked_desk(decision, known_desks)
    if not kept:
        raise UserError(f"every member of {candidate.id} was removed; dismiss it instead")
    members = [run.members[i] for i in kept]
    waiting = [m.open_item for m in members if m.open_item is not None]
    new_items = [_item(run, m) for m in members if m.complaint_id is None]
    ids = store.decide_group(
        waiting, new_items, final_label=desk, reviewer=reviewer, actor=actor,
        action=ACTIONS[decision.kind], details={**details, "desk": desk},
    )  # fmt: skip
    return DecisionRecord(desk, tuple(ids), len(members) - len(waiting) - len(new_items))


def _checked_desk(decision: CandidateDecision, known_desks: Sequence[str]) -> str:
    desk = " ".join(str(decision.desk or "").split())
    if not desk:
        raise UserError("give the desk's name")
    if len(desk) > MAX_DESK_CHARS or not desk.isprintable():
        raise UserError(f"a desk's name is one line of at most {MAX_DESK_CHARS} characters")
    known = {d.casefold(): d for d in known_desks}
    if decision.kind == NAME and desk.casefold() in known:
        raise UserError(
            f"{known[desk.casefold()]!r} is a desk the model knows: assign the candidate to it"
        )
    if decision.kind == ASSIGN and desk not in known_desks:
        raise UserError(f"{desk!r} is not a desk of the model; name it as a new desk instead")
    return desk


def _item(run: DiscoveryRun, member: Member) -> TriageItem:
    """A file's member as a triage item of the run's batch, at its row."""
    return TriageItem(
        batch=run.batch, text=member.text, predicted_label=member.predicted_label,
        confidence=member.confidence, probabilities=member.probabilities, row=member.row,
    )  # fmt: skip
