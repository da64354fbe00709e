"""What Grievance Lens users do in the load test (bench.bench_load), through the protocol client:
a reviewer clicking through Data, Classify, Explain and Triage, and an analyst training a model.

All page-specific knowledge lives here: widget keys and labels, and the element that proves an
interaction worked (a step that ends without it counts as failed, however fast it was).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.streamlit_client import RunResult, RunTimeout, StreamlitSession
from core.data.privacy import mask_personal_data

SETUP = "setup: "  # steps a user does once to get going; reported, not judged against goals
TRAINED = re.compile(r"Trained in (\d+) s")
ITEM_ID = re.compile(r"#(\d+):")


@dataclass(frozen=True)
class StepRecord:
    """One timed interaction: from sending the BackMsg to script_finished (and its check)."""

    phase: str
    session: int
    name: str
    started_s: float  # since the phase started
    seconds: float
    ok: bool
    error: str = ""


@dataclass
class Recorder:
    """The steps of one phase, timed from its start."""

    phase: str
    t0: float = field(default_factory=time.perf_counter)
    steps: list[StepRecord] = field(default_factory=list)
    # Runs that finished with no client waiting for them (late ones after a timeout); anything
    # else here would mean the client misread the protocol.
    ignored_finishes: int = 0

    def add(self, session: int, name: str, started: float, ok: bool, error: str = "") -> None:
        seconds = time.perf_counter() - started
        self.steps.append(
            StepRecord(self.phase, session, name, started - self.t0, seconds, ok, error[:300])
        )


class StepFailed(Exception):
    """The run finished but did not show what the interaction should have produced."""


class SessionLost(Exception):
    """The session timed out or its connection broke; the user reloads the app."""


class PhaseOver(Exception):
    """The phase ended before this step started; it is not run."""


@dataclass
class TextSource:
    """Complaints to type: each explanation text used once (the Explain page caches per text)."""

    texts: list[str]
    _next: int = 0

    def left(self) -> int:
        return len(self.texts) - self._next

    def take(self) -> str:
        self._next += 1
        return self.texts[self._next - 1]


Check = Callable[[RunResult], None]


def shows(part: str) -> Check:
    def check(result: RunResult) -> None:
        if not result.has_text(part):
            raise StepFailed(f"expected {part!r}; {_shown_problem(result)}")

    return check


def has_widget(key: str) -> Check:
    def check(result: RunResult) -> None:
        if result.find(key=key) is None:
            raise StepFailed(f"expected widget {key!r}; {_shown_problem(result)}")

    return check


def has_metric(label: str) -> Check:
    def check(result: RunResult) -> None:
        if result.metric(label) is None:
            raise StepFailed(f"expected metric {label!r}; {_shown_problem(result)}")

    return check


def has_button(form: str, label_prefix: str) -> Check:
    def check(result: RunResult) -> None:
        if result.find(kind="button", form=form, label_prefix=label_prefix) is None:
            raise StepFailed(f"expected button {label_prefix!r}...; {_shown_problem(result)}")

    return check


def any_of(*checks: Check) -> Check:
    def check(result: RunResult) -> None:
        problems = []
        for each in checks:
            try:
                return each(result)
            except StepFailed as exc:
                problems.append(str(exc))
        raise StepFailed(" / ".join(problems))

    return check


def all_of(*checks: Check) -> Check:
    def check(result: RunResult) -> None:
        for each in checks:
            each(result)

    return check


def _shown_problem(result: RunResult) -> str:
    """What the page said instead: an exception, or its alerts, or its first texts."""
    shown = result.exception() or "; ".join(result.alerts()) or " | ".join(result.texts()[:4])
    return f"page shows: {shown[:200]}"


class User:
    """One browser tab: a protocol session whose steps are timed into a Recorder."""

    def __init__(
        self, base_url: str, index: int, recorder: Recorder, *, timeout: float,
        stop: asyncio.Event | None = None,
    ) -> None:  # fmt: skip
        self.base_url, self.index, self.recorder, self.timeout = base_url, index, recorder, timeout
        self.stop = stop or asyncio.Event()  # set: the phase is over, start no more steps
        self.session = StreamlitSession(base_url)

    async def step(
        self, name: str, action: Callable[[], Awaitable[RunResult]], check: Check
    ) -> RunResult:
        """Run and time one interaction; a failed one is recorded, then raised."""
        if self.stop.is_set():
            raise PhaseOver
        started = time.perf_counter()
        try:
            result = await action()
            check(result)
        except (RunTimeout, ConnectionError, OSError) as exc:
            self.recorder.add(self.index, name, started, False, f"{type(exc).__name__}: {exc}")
            raise SessionLost(str(exc)) from exc
        except (StepFailed, LookupError, KeyError) as exc:
            self.recorder.add(self.index, name, started, False, f"{type(exc).__name__}: {exc}")
            raise
        self.recorder.add(self.index, name, started, True)
        return result

    def failed(self, name: str, message: str) -> StepFailed:
        """Record step `name` as failed before it could be sent; the error to raise."""
        self.recorder.add(self.index, name, time.perf_counter(), False, message)
        return StepFailed(message)

    async def open(self, title: str, name: str, check: Check) -> RunResult:
        return await self.step(name, lambda: self.session.open_page(title, timeout=self.timeout),
                               check)  # fmt: skip

    async def reconnect(self) -> None:
        await self.close()
        self.session = StreamlitSession(self.base_url)

    async def close(self) -> None:
        await self.session.close()
        self.recorder.ignored_finishes += self.session.ignored_finishes


class Reviewer(User):
    """Loads the demo data, chooses the bench's model, then cycles through the pages."""

    def __init__(
        self, base_url: str, index: int, recorder: Recorder, *, timeout: float,
        stop: asyncio.Event, model: str, texts: TextSource, rng: random.Random,
        think_s: tuple[float, float], item_slots: int,
    ) -> None:  # fmt: skip
        super().__init__(base_url, index, recorder, timeout=timeout, stop=stop)
        self.model, self.texts, self.rng, self.think_s = model, texts, rng, think_s
        self.item_slots = item_slots  # items whose id % item_slots == index are this user's
        self.ready = False  # demo data loaded and model chosen in this session

    async def think(self) -> None:
        """A pause of think_s seconds (uniform, seeded); returns early when the phase ends."""
        pause = self.rng.uniform(*self.think_s)
        try:
            await asyncio.wait_for(self.stop.wait(), pause)
        except TimeoutError:
            return

    async def run(self) -> None:
        """Start, then visit the pages in turn (from a random one) until `stop` is set."""
        flows = [self.classify, self.explain, self.triage, self.data]
        turn = self.rng.randrange(len(flows))
        await self.think()  # users arrive spread out, not all in one millisecond
        try:
            while not self.stop.is_set():
                await self._next(flows[turn % len(flows)])
                turn += 1
                await self.think()
        except PhaseOver:
            pass
        finally:
            await self.close()

    async def _next(self, flow: Callable[[], Awaitable[None]]) -> None:
        """Set up if needed, then one flow; a failure is recorded, a lost session reloaded."""
        try:
            if not self.ready:
                await self.start()
                self.ready = True
            await flow()
        except SessionLost:
            await self.reconnect()
        except (StepFailed, LookupError, KeyError):
            if not self.ready:  # half set up: start again in a fresh tab
                await self.reconnect()

    async def reconnect(self) -> None:
        await super().reconnect()
        self.ready = False

    async def start(self) -> None:
        s, t = self.session, self.timeout
        first = await self.step(
            "setup: connect", lambda: s.connect(timeout=t), has_widget("data.demo")
        )
        demo = first.widget(key="data.demo")
        await self.step("data: load demo data", lambda: s.click(demo, timeout=t),
                        shows("Validation report"))  # fmt: skip
        await self.think()
        train = await self.open("Train", SETUP + "open Train", has_widget("train.pick"))
        use = train.widget(key="train.load")
        pick = train.widget(key="train.pick")
        await self.step(
            SETUP + "choose model", lambda: s.click(use, values={pick.id: self.model}, timeout=t),
            shows(f"Active model: {self.model}"),
        )  # fmt: skip
        await self.think()

    async def classify(self) -> None:
        await self.submit_new_text(
            "Classify", "classify", shown_first=has_widget("classify.text"),
            form="classify.one", box_key="classify.text",
            shown_after=lambda _: has_metric("Transformer"),
        )  # fmt: skip

    async def explain(self) -> None:
        await self.submit_new_text(
            "Explain", "explain", shown_first=shows("Word by word"), form="explain.typed",
            box_key="explain.text",
            shown_after=lambda text: all_of(shows("Word by word"), shows(mask_personal_data(text))),
        )  # fmt: skip

    async def submit_new_text(
        self, page_name: str, prefix: str, *, shown_first: Check, form: str, box_key: str,
        shown_after: Callable[[str], Check],
    ) -> None:  # fmt: skip
        """Open `page_name`, think, then type a complaint never sent before into `box_key` and
        submit `form` (steps "<prefix>: open page" and "<prefix>: one complaint")."""
        page = await self.open(page_name, f"{prefix}: open page", shown_first)
        await self.think()
        box = page.widget(key=box_key)
        submit = page.widget(kind="button", form=form)
        step = f"{prefix}: one complaint"
        text = self.take_text(step)
        await self.step(
            step,
            lambda: self.session.click(submit, values={box.id: text}, timeout=self.timeout),
            shown_after(text),
        )

    async def triage(self) -> None:
        page = await self.open("Triage queue", "triage: open page", shows("Waiting for review"))
        name = page.find(key="triage.reviewer_name")
        if name is not None:
            await self.think()
            submit = page.widget(kind="button", form="triage.reviewer_form")
            page = await self.step(
                "triage: reviewer name",
                lambda: self.session.click(submit, values={name.id: f"load bench {self.index}"},
                                           timeout=self.timeout),
                shows("Reviewing as"),
            )  # fmt: skip
        await self.think()
        item, option = self.my_item(page)
        chooser = page.widget(key="triage.item")
        form = f"triage.decide.{item}"
        chosen = await self.step(
            "triage: pick item",
            lambda: self.session.rerun(values={chooser.id: option}, timeout=self.timeout),
            has_button(form, "Confirm"),
        )
        await self.think()
        confirm = chosen.widget(kind="button", form=form, label_prefix="Confirm")
        verdict = lambda: self.session.click(confirm, timeout=self.timeout)  # noqa: E731
        await self.step("triage: verdict", verdict, shows(f"Saved: item #{item}"))

    def take_text(self, step: str) -> str:
        if not self.texts.left():
            raise self.failed(step, "the bench ran out of unused complaints; shorten the phase")
        return self.texts.take()

    def my_item(self, page: RunResult) -> tuple[int, str]:
        """The first waiting item of this user's slot (so users never decide the same item)."""
        chooser = page.find(key="triage.item")
        for option in chooser.options if chooser else ():
            found = ITEM_ID.match(option)
            if found and int(found.group(1)) % self.item_slots == self.index:
                return int(found.group(1)), option
        raise self.failed("triage: pick item", "no waiting item left in this user's share of the "
                          "triage queue; queue more items (--triage-items)")  # fmt: skip

    async def data(self) -> None:
        await self.open("Data", "data: open page", shows("Validation report"))


@dataclass(frozen=True)
class TrainSettings:
    """What the analyst types into the Train form (everything else stays at its default)."""

    backbone: str  # "minilm" or "tiny"
    epochs: int
    max_steps: int  # 0: no limit
    batch_size: int


@dataclass(frozen=True)
class TrainingOutcome:
    status: str  # "done", "failed", "cancelled" or "timeout"
    client_seconds: float  # from pressing Start training to the page showing the outcome
    server_seconds: float | None  # TrainResult.train_seconds (model card, else the page's "N s")
    message: str = ""


_BACKBONE_OPTION = {"minilm": "MiniLM", "tiny": "Tiny"}


class Analyst(User):
    """Loads training data (an upload, or the demo data), starts a training on the Train page
    and watches it as a browser would (the progress fragment's auto reruns) until it ends."""

    async def load_data(self, upload: tuple[str, bytes] | None) -> None:
        s, t = self.session, self.timeout
        page = await self.step(
            SETUP + "connect", lambda: s.connect(timeout=t), has_widget("data.demo")
        )
        if upload is None:
            demo = page.widget(key="data.demo")
            await self.step("data: load demo data", lambda: s.click(demo, timeout=t),
                            shows("Validation report"))  # fmt: skip
            return
        name, data = upload
        box = page.widget(key="data.upload")
        await self.step(
            "data: upload training data",
            lambda: s.upload(box, name, data, content_type="text/csv", timeout=t),
            shows(f"Validation report: {name}"),
        )

    async def prepare(self, settings: TrainSettings) -> RunResult:
        page = await self.open("Train", SETUP + "open Train", has_widget("train.recipe"))
        recipe = page.widget(key="train.recipe")
        full = next(o for o in recipe.options if o.startswith("Full"))
        page = await self.step(
            SETUP + "choose full fine-tuning",
            lambda: self.session.rerun(values={recipe.id: full}, timeout=self.timeout),
            has_widget("train.backbone"),
        )
        chooser = page.widget(key="train.backbone")
        option = next(
            o for o in chooser.options if o.startswith(_BACKBONE_OPTION[settings.backbone])
        )
        return await self.step(
            SETUP + "choose backbone",
            lambda: self.session.rerun(values={chooser.id: option}, timeout=self.timeout),
            has_widget("train.epochs"),
        )

    async def start(self, page: RunResult, settings: TrainSettings, *, save_as: str) -> float:
        """Press Start training (the model saves itself as `save_as`); returns the
        perf_counter time of pressing it."""
        values = {
            page.widget(key="train.model_name").id: save_as,
            page.widget(key="train.epochs").id: settings.epochs,
            page.widget(key="train.max_steps").id: settings.max_steps,
            page.widget(key="train.batch").id: settings.batch_size,
            page.widget(key="train.patience").id: settings.epochs,  # no early stop: fixed work
        }
        submit = page.widget(key="train.start")
        started = time.perf_counter()
        await self.step(
            "train: start", lambda: self.session.click(submit, values=values, timeout=self.timeout),
            _training_shown,
        )  # fmt: skip
        return started

    async def watch(
        self, started: float, *, timeout_s: float, models: Path, save_as: str,
        ended: asyncio.Event | None = None,
    ) -> TrainingOutcome:  # fmt: skip
        """Poll as the page's progress fragment does until the training has ended (then set
        `ended`); save the model (for its exact train_seconds) unless the app saved it."""
        before = set(_cards(models))
        deadline = started + timeout_s
        while time.perf_counter() < deadline:
            outcome = _outcome(self.session.last) or _saved_card(models, before)
            if outcome is not None:
                seconds = time.perf_counter() - started
                if ended is not None:
                    ended.set()
                return await self._finish(outcome, seconds, models, before, save_as)
            await self._poll()
        await self._cancel()
        return TrainingOutcome("timeout", time.perf_counter() - started, None,
                               f"not finished within {timeout_s:g} s; cancelled")  # fmt: skip

    async def _poll(self) -> None:
        """One auto rerun of the progress fragment (a full rerun when there is none)."""
        fragments = self.session.auto_reruns
        fragment, interval = next(iter(fragments.items()), ("", 1.0))
        await asyncio.sleep(interval)
        try:
            await self.session.rerun(fragment_id=fragment, timeout=self.timeout)
        except RunTimeout:  # a fragment a full run removed gets no answer: rerun the page
            self.session.abandon()
            await self.session.rerun(timeout=self.timeout)

    async def _cancel(self) -> None:
        cancel = self.session.last.find(key="train.cancel") if self.session.last else None
        if cancel is not None:
            await self.session.click(cancel, timeout=self.timeout)

    async def _finish(
        self, outcome: tuple[str, str], seconds: float, models: Path, before: set[str], name: str
    ) -> TrainingOutcome:
        status, message = outcome
        if status != "done":
            return TrainingOutcome(status, seconds, None, message)
        card = next(iter(set(_cards(models)) - before), None)
        form = self.session.last.find(key="train.save_name") if self.session.last else None
        if card is None and form is not None:
            submit = self.session.last.widget(kind="button", form="train.save_form")
            await self.session.click(submit, values={form.id: name}, timeout=self.timeout)
            card = name if (models / name / "card.json").is_file() else None
        server = _card_seconds(models / card) if card else _page_seconds(message)
        return TrainingOutcome("done", seconds, server, message)


def _outcome(page: RunResult | None) -> tuple[str, str] | None:
    """("done" | "failed" | "cancelled", what the page said) once the training has ended."""
    if page is None:
        return None
    for shown in page.alerts():
        if TRAINED.search(shown):
            return "done", shown
        if shown.startswith("Training failed"):
            return "failed", shown
        if shown.startswith("Training was cancelled"):
            return "cancelled", shown
    return None


def _training_shown(page: RunResult) -> None:
    """After Start training: the progress (its Cancel button) or, if that quick, the outcome."""
    if page.find(key="train.cancel") is None and _outcome(page) is None:
        raise StepFailed(f"the training did not start; {_shown_problem(page)}")


def _cards(models: Path) -> Iterator[str]:
    return (p.parent.name for p in models.glob("*/card.json"))


def _saved_card(models: Path, before: set[str]) -> tuple[str, str] | None:
    """("done", ...) when a model the app saved by itself has appeared in the models folder."""
    new = set(_cards(models)) - before
    return ("done", f"saved as {sorted(new)[0]}") if new else None


def _card_seconds(folder: Path) -> float | None:
    seconds = json.loads((folder / "card.json").read_text(encoding="utf-8")).get("train_seconds")
    return float(seconds) if seconds is not None else None


def _page_seconds(message: str) -> float | None:
    found = TRAINED.search(message)
    return float(found.group(1)) if found else None
