"""Discovering candidate desks (core.analysis.discovery) on a complaint file or on the inbox, as
work of the server's queue (with progress and cancel) or of the command line.

A file is classified with the model and the rows it flags as fitting no desk are grouped; the
inbox's complaints were flagged by the live model when they arrived, and only those received
since a given time are grouped. Either way each grouped complaint keeps where it came from (the
file's row, the inbox complaint and its open triage item), so that a reviewer's decision on a
candidate (core.review.new_desks) becomes a verdict on each member.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from core.access import Permission
from core.analysis.discovery import (
    KNOWN_TEXTS_PER_DESK,
    Discovery,
    DiscoveryConfig,
    find_candidates,
)
from core.errors import UserError
from core.jobs import Job, JobQueue, Requester
from core.models.flagging import UNKNOWN
from core.models.registry import LoadedModel
from core.progress import Progress, ProgressCallback
from core.review.store import Store

DISCOVER_PHASE = "embed"  # the Progress phase while complaints are read by the model
DEFAULT_PERIOD = timedelta(days=7)  # the inbox's period when none is given


def since_moment(text: str | None, *, now: datetime | None = None) -> str:
    """The start of an inbox period as the inbox stores times (ISO 8601, UTC, "...Z"): `text`
    (a date or a date and time; UTC unless it says otherwise), or the last DEFAULT_PERIOD."""
    from core.board.moments import parse_as_of
    from core.intake.inbox import inbox_time

    if text is None:
        moment = (now or datetime.now(UTC)) - DEFAULT_PERIOD
    else:
        moment = parse_as_of(text, "--since")
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    return inbox_time(moment)


@dataclass(frozen=True)
class Member:
    """One grouped complaint: its text, how the model routed it, and where it came from."""

    text: str
    predicted_label: str
    confidence: float
    probabilities: dict[str, float]
    row: int | None = None  # the file's 1-based data row
    complaint_id: int | None = None  # the inbox complaint
    open_item: int | None = None  # its triage item waiting for a verdict (inbox only)

    @property
    def origin(self) -> int:
        """Where it came from: the file's row, or the inbox complaint's id."""
        return self.row if self.complaint_id is None else self.complaint_id


@dataclass(frozen=True)
class DiscoveryRun:
    """A discovery and its members (aligned with the discovery's positions)."""

    discovery: Discovery
    members: tuple[Member, ...]
    source: str  # what was read, for people: "complaints.csv" or "the inbox since ..."
    batch: str  # the triage batch a file's members are queued in ("inbox" for the inbox)
    model: str  # the model's name
    model_digest: str
    total: int  # complaints read (a file's rows; the inbox's flagged complaints)
    flagged: int  # of which flagged as fitting no desk

    def member_rows(self, candidate_id: str) -> list[int]:
        """The file rows (1-based) or inbox complaint ids of a candidate's members."""
        members = self.discovery.candidate(candidate_id).members
        return [self.members[i].origin for i in members]


def discover_in_file(
    loaded: LoadedModel,
    texts: Sequence[str],
    *,
    source: str,
    config: DiscoveryConfig,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> DiscoveryRun | None:
    """Classify `texts` (a file's rows, in order) with `loaded` and group the rows it flags as
    fitting no desk; None when cancelled. At most `config.max_complaints` rows."""
    from core.models.classify import classification_with_embeddings

    texts = ["" if t is None else str(t) for t in texts]
    if len(texts) > config.max_complaints:
        raise UserError(
            f"the file has {len(texts):,} complaints; discovery reads at most "
            f"{config.max_complaints:,} per run: split the file or raise the cap"
        )
    found = classification_with_embeddings(loaded, texts, on_progress=on_progress, cancel=cancel)
    if found is None:
        return None
    frame, features = found
    flagged = np.flatnonzero(frame["review_reason"].to_numpy() == UNKNOWN)
    members = tuple(_file_member(frame, texts, int(i)) for i in flagged)
    routed = frame["review_reason"].to_numpy() == ""
    known = _texts_by_desk([texts[i] for i in np.flatnonzero(routed)],
                           frame["predicted_label"].to_numpy()[routed])  # fmt: skip
    discovery = _grouped(loaded, features[flagged], members, known, config, cancel)
    if discovery is None:
        return None
    batch = "discovery:" + hashlib.sha256("\x1f".join(texts).encode()).hexdigest()[:16]
    return DiscoveryRun(discovery, members, source, batch, loaded.path.name, loaded.digest,
                        len(texts), len(flagged))  # fmt: skip


def discover_in_inbox(
    store: Store,
    loaded: LoadedModel,
    *,
    since: str,
    config: DiscoveryConfig,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> DiscoveryRun | None:
    """Group the inbox complaints received since `since` (ISO 8601, UTC) that the live model
    flagged as fitting no desk, the newest `config.max_complaints` of them, on `loaded`'s
    embeddings; None when cancelled."""
    from core.intake.queue import flagged_complaints, routed_texts
    from core.models.classifier import predict_with_features_in_batches

    flagged = flagged_complaints(store, since=since, limit=config.max_complaints)
    members = tuple(
        Member(c.text, c.desk, c.confidence, c.probabilities, complaint_id=c.complaint_id,
               open_item=c.open_item)
        for c in flagged
    )  # fmt: skip

    def on_rows(done: int) -> None:
        if on_progress is not None:
            on_progress(Progress(done, len(members), DISCOVER_PHASE))

    scored = predict_with_features_in_batches(
        loaded.scorer, [m.text for m in members], on_rows=on_rows, cancel=cancel
    )
    if scored is None:
        return None
    known = routed_texts(store, since=since, per_desk=KNOWN_TEXTS_PER_DESK)
    discovery = _grouped(loaded, scored[1], members, known, config, cancel)
    if discovery is None:
        return None
    return DiscoveryRun(discovery, members, f"the inbox since {since}", "inbox",
                        loaded.path.name, loaded.digest, len(members), len(members))  # fmt: skip


def start_discovery(
    work: Callable[..., DiscoveryRun | None], *, title: str, queue: JobQueue, requester: Requester
) -> Job[DiscoveryRun | None]:
    """Queue `work(on_progress=, cancel=)` (a `discover_in_*` with its arguments bound) on the
    CPU lane for a reviewer: it reads every flagged complaint with the model."""
    task = requester.task(work, title, "discover")
    return queue.submit(task, actor=requester.actor, permission=Permission.DECIDE)


def _grouped(
    loaded: LoadedModel,
    features: np.ndarray,
    members: tuple[Member, ...],
    known: dict[str, list[str]],
    config: DiscoveryConfig,
    cancel: threading.Event | None,
) -> Discovery | None:
    features = np.asarray(features).reshape(len(members), -1)
    detector = loaded.detector
    return find_candidates(
        features, [m.text for m in members],
        desk_means=None if detector is None else detector.means,
        desks=loaded.classes, known_texts=known, config=config,
        cancel=cancel,
    )  # fmt: skip


def _file_member(frame: pd.DataFrame, texts: list[str], i: int) -> Member:
    probabilities = {
        column.removeprefix("prob_"): float(frame.at[i, column])
        for column in frame.columns
        if column.startswith("prob_")
    }
    return Member(texts[i], str(frame.at[i, "predicted_label"]),
                  float(frame.at[i, "confidence"]), probabilities, row=i + 1)  # fmt: skip


def _texts_by_desk(texts: Sequence[str], desks: Sequence[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for text, desk in zip(texts, desks, strict=True):
        if len(grouped.setdefault(str(desk), [])) < KNOWN_TEXTS_PER_DESK:
            grouped[str(desk)].append(text)
    return grouped
