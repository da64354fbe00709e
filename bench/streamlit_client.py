"""A browser tab without a browser: one Streamlit session driven over Streamlit's own websocket
protocol, for load tests that must not spend the server's cores on Chromium.

It connects to ws://HOST:PORT/_stcore/stream (subprotocol "streamlit"), sends `BackMsg`s
(`rerun_script` with a `ClientState`: page, widget values, a button's trigger) and reads
`ForwardMsg`s until `script_finished`, keeping the elements of the run as the frontend would.
A widget is found in the last run by its key (Streamlit's id ends with "-<key>") or by label;
"clicking" it is a rerun with its trigger set, plus the values the caller gives (a form's fields).
Written for Streamlit 1.67 (Starlette server); uses `websockets`, already a dependency.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Common_pb2 import FileUploaderState, FileURLs, UploadedFileInfo
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

XSRF_COOKIE = "_streamlit_xsrf"
MAX_CACHED_MESSAGES = 2000  # the frontend's message cache, bounded


class Trigger:
    """The value of a button press (sent once, never kept)."""


CLICK = Trigger()
WidgetValue = Trigger | bool | int | float | str | list[str] | tuple[float, ...] | FileUploaderState

_FINAL = {
    ForwardMsg.FINISHED_SUCCESSFULLY: "finished",
    ForwardMsg.FINISHED_WITH_COMPILE_ERROR: "compile_error",
    ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY: "fragment",
}
_TEXT_KINDS = ("markdown", "heading", "text", "alert", "code", "exception")
_MARKDOWN_KINDS = ("markdown", "heading", "alert")
# What Markdown shows of an escaped string: "\\#" as "#"; invisible word joiners dropped.
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])|\u2060")


class RunTimeout(TimeoutError):
    """A run did not finish within its timeout; the session should be dropped."""


@dataclass(frozen=True)
class Widget:
    """One widget of a run: its id (what the server knows it by) and what a user sees."""

    id: str
    kind: str  # the Element field: "button", "text_area", "selectbox", ...
    label: str
    form_id: str
    options: tuple[str, ...]
    set_by_script: bool = False  # the run set its value (st.session_state[key] = ...)

    @property
    def key(self) -> str:
        """The user key given in the page (the id's last part), or ""."""
        parts = self.id.split("-", 2)
        return parts[2] if self.id.startswith("$$ID-") and len(parts) == 3 else ""


@dataclass(frozen=True)
class Page:
    script_hash: str
    name: str  # the title given to st.Page
    url_pathname: str


@dataclass(frozen=True)
class RunResult:
    """What a run left on screen: its elements in order, and how the run ended."""

    status: str  # "finished", "compile_error" or "fragment"
    elements: tuple[Element, ...]
    seconds: float  # from sending the BackMsg to script_finished

    def widgets(self) -> list[Widget]:
        found = []
        for element in self.elements:
            kind = element.WhichOneof("type")
            proto = getattr(element, kind) if kind else None
            if proto is not None and getattr(proto, "id", ""):
                found.append(
                    Widget(
                        proto.id, kind, getattr(proto, "label", ""), getattr(proto, "form_id", ""),
                        tuple(getattr(proto, "options", ())), bool(getattr(proto, "set_value", 0)),
                    )
                )  # fmt: skip
        return found

    def find(
        self,
        *,
        key: str | None = None,
        label: str | None = None,
        kind: str | None = None,
        form: str | None = None,
        label_prefix: str | None = None,
    ) -> Widget | None:
        """The one widget matching every given criterion; None when there is none.

        Raises LookupError when several match (an ambiguous label)."""
        matches = [
            w
            for w in self.widgets()
            if (key is None or w.key == key)
            and (label is None or w.label == label)
            and (label_prefix is None or w.label.startswith(label_prefix))
            and (kind is None or w.kind == kind)
            and (form is None or w.form_id == form)
        ]
        if len(matches) > 1:
            names = ", ".join(f"{w.kind} {w.label!r} ({w.id})" for w in matches)
            raise LookupError(f"{len(matches)} widgets match: {names}")
        return matches[0] if matches else None

    def widget(self, **criteria: str) -> Widget:
        """`find(**criteria)`, raising LookupError (with the widgets on screen) when absent."""
        found = self.find(**criteria)
        if found is None:
            seen = ", ".join(f"{w.kind}:{w.key or w.label!r}" for w in self.widgets())
            raise LookupError(f"no widget with {criteria}; on screen: {seen or 'none'}")
        return found

    def texts(self) -> list[str]:
        """The visible strings: markdown, headings, text, alerts, code, exceptions, metrics."""
        out = []
        for element in self.elements:
            kind = element.WhichOneof("type")
            if kind in _TEXT_KINDS:
                proto = getattr(element, kind)
                body = getattr(proto, "body", "") or getattr(proto, "message", "")
                out.append(_displayed(body) if kind in _MARKDOWN_KINDS else body)
            elif kind == "metric":
                out.append(f"{_displayed(element.metric.label)}: {_displayed(element.metric.body)}")
        return out

    def has_text(self, part: str) -> bool:
        return any(part in text for text in self.texts())

    def metric(self, label: str) -> str | None:
        """The value of the metric labelled `label`, or None."""
        for element in self.elements:
            if element.WhichOneof("type") == "metric" and element.metric.label == label:
                return element.metric.body
        return None

    def alerts(self) -> list[str]:
        """The bodies of st.success/info/warning/error, as displayed."""
        return [_displayed(e.alert.body) for e in self.elements if e.WhichOneof("type") == "alert"]

    def exception(self) -> str | None:
        """The first exception shown (type and message), or None."""
        for element in self.elements:
            if element.WhichOneof("type") == "exception":
                return f"{element.exception.type}: {element.exception.message}".strip(": ")
        return None


def _displayed(markdown: str) -> str:
    """`markdown` as a reader sees it, for strings escaped with backslashes (ui.safe.md_escape)."""
    return _ESCAPED.sub(lambda m: m.group(1) or "", markdown)


@dataclass
class _Run:
    """The run being received: elements by delta path, and the future its caller awaits."""

    elements: dict[tuple[int, ...], Element] = field(default_factory=dict)
    done: asyncio.Future[str] | None = None
    # script_run_id of the last run that started after the caller's BackMsg: only its
    # script_finished ends the wait (never a late one of a run the caller gave up on).
    run_id: str | None = None


def _widget_state(widget_id: str, value: WidgetValue) -> WidgetState:
    state = WidgetState(id=widget_id)
    if isinstance(value, Trigger):
        state.trigger_value = True
    elif isinstance(value, bool):  # before int: bool is an int
        state.bool_value = value
    elif isinstance(value, int):
        state.int_value = value
    elif isinstance(value, float):
        state.double_value = value
    elif isinstance(value, str):
        state.string_value = value
    elif isinstance(value, list):
        state.string_array_value.data.extend(value)
    elif isinstance(value, tuple):
        state.double_array_value.data.extend(value)
    elif isinstance(value, FileUploaderState):
        state.file_uploader_state_value.CopyFrom(value)
    else:
        raise TypeError(f"unsupported widget value {value!r}")
    return state


def xsrf_cookie(base_url: str, *, timeout: float = 10.0) -> str | None:
    """The XSRF cookie the server sets on /_stcore/health (None when XSRF is off)."""
    with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=timeout) as response:
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            if name.strip() == XSRF_COOKIE:
                return rest.split(";", 1)[0]
    return None


def _multipart(name: str, data: bytes, content_type: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        f"Content-Type: {content_type}\r\n\r\n"
    ).encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), boundary


class StreamlitSession:
    """One websocket session (one browser tab) on a Streamlit server at `base_url`.

    Widget values set with `rerun(values=...)` are kept and sent again with every later run,
    as the frontend does, until a full run no longer shows the widget; triggers are sent once.
    Fragments that asked for auto reruns (`st.fragment(run_every=...)`) are in `auto_reruns`.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.session_id = ""
        self.pages: dict[str, Page] = {}
        self.page_hash = ""
        self.auto_reruns: dict[str, float] = {}  # fragment id -> seconds between reruns
        self.last: RunResult | None = None
        self.ignored_finishes = 0
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._run = _Run()
        self._values: dict[str, WidgetState] = {}
        self._cache: dict[str, ForwardMsg] = {}
        self._file_urls: dict[str, asyncio.Future[FileURLs]] = {}
        self._xsrf: str | None = None
        self._closed_reason: str | None = None

    # ------------------------------------------------------------------ connection
    async def connect(self, *, timeout: float) -> RunResult:
        """Open the websocket and run the default page, as a new tab does."""
        host = urlsplit(self.base_url).netloc
        self._xsrf = await asyncio.to_thread(xsrf_cookie, self.base_url)
        headers = {"Cookie": f"{XSRF_COOKIE}={self._xsrf}"} if self._xsrf else {}
        protocols = [Subprotocol("streamlit")] + ([Subprotocol(self._xsrf)] if self._xsrf else [])
        self._ws = await connect(
            f"ws://{host}/_stcore/stream", subprotocols=protocols, additional_headers=headers,
            origin=self.base_url, max_size=None, proxy=None, open_timeout=timeout,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read(), name="streamlit-reader")
        return await self.rerun(timeout=timeout)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    # ------------------------------------------------------------------------ runs
    async def rerun(
        self,
        *,
        values: Mapping[str, WidgetValue] | None = None,
        page: str | None = None,
        fragment_id: str = "",
        timeout: float,
    ) -> RunResult:
        """Rerun the current page (or `page`, a title) with `values` ({widget id: value});
        returns when the run (and any st.rerun it asked for) has finished."""
        if self._run.done is not None and not self._run.done.done():
            raise RuntimeError("a run is already in flight on this session")
        for widget_id, value in (values or {}).items():
            state = _widget_state(widget_id, value)
            if not isinstance(value, Trigger):
                self._values[widget_id] = state
        if page is not None:
            self.page_hash = self.pages[page].script_hash
        triggers = [
            _widget_state(i, v) for i, v in (values or {}).items() if isinstance(v, Trigger)
        ]
        client = ClientState(
            page_script_hash=self.page_hash, fragment_id=fragment_id,
            is_auto_rerun=bool(fragment_id), cached_message_hashes=list(self._cache),
        )  # fmt: skip
        client.widget_states.widgets.extend([*self._values.values(), *triggers])
        self._run.done = asyncio.get_running_loop().create_future()
        self._run.run_id = None
        started = time.perf_counter()
        await self._send(BackMsg(rerun_script=client))
        try:
            status = await asyncio.wait_for(asyncio.shield(self._run.done), timeout)
        except TimeoutError as exc:
            raise RunTimeout(f"no script_finished within {timeout:g} s") from exc
        result = RunResult(
            status, tuple(self._run.elements.values()), time.perf_counter() - started
        )
        self._forget_values(result, full_run=status != "fragment")
        self.last = result
        return result

    def _forget_values(self, result: RunResult, *, full_run: bool) -> None:
        """Drop the values of widgets a full run no longer shows, and of widgets whose value the
        script set (`set_value`): the frontend takes the server's value then."""
        shown = {w.id for w in result.widgets()}
        set_by_script = {w.id for w in result.widgets() if w.set_by_script}
        self._values = {
            i: state for i, state in self._values.items()
            if (i in shown or not full_run) and i not in set_by_script
        }  # fmt: skip

    def abandon(self) -> None:
        """Stop waiting for a run that timed out (its late messages may still arrive)."""
        done = self._run.done
        if done is not None and not done.done():
            done.cancel()

    async def open_page(self, title: str, *, timeout: float) -> RunResult:
        """Navigate to the page titled `title` (as a click in the sidebar)."""
        return await self.rerun(page=title, timeout=timeout)

    async def click(
        self, widget: Widget, *, values: Mapping[str, WidgetValue] | None = None, timeout: float
    ) -> RunResult:
        """Press `widget` (a button or a form's submit button), sending `values` with it."""
        return await self.rerun(values={**(values or {}), widget.id: CLICK}, timeout=timeout)

    async def upload(
        self, widget: Widget, name: str, data: bytes, *, content_type: str, timeout: float
    ) -> RunResult:
        """Upload `data` as file `name` into a file_uploader, then rerun as the frontend does."""
        request_id = uuid.uuid4().hex
        future = asyncio.get_running_loop().create_future()
        self._file_urls[request_id] = future
        request = BackMsg()
        request.file_urls_request.request_id = request_id
        request.file_urls_request.file_names.append(name)
        request.file_urls_request.session_id = self.session_id
        await self._send(request)
        urls = await asyncio.wait_for(future, timeout)
        await asyncio.to_thread(self._put, urls.upload_url, name, data, content_type, timeout)
        info = UploadedFileInfo(name=name, size=len(data), file_id=urls.file_id, file_urls=urls)
        state = FileUploaderState(uploaded_file_info=[info])
        return await self.rerun(values={widget.id: state}, timeout=timeout)

    def _put(self, url: str, name: str, data: bytes, content_type: str, timeout: float) -> None:
        body, boundary = _multipart(name, data, content_type)
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        if self._xsrf:
            headers |= {"X-Xsrftoken": self._xsrf, "Cookie": f"{XSRF_COOKIE}={self._xsrf}"}
        target = url if url.startswith("http") else f"{self.base_url}{url}"
        request = urllib.request.Request(target, data=body, method="PUT", headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()

    async def _send(self, msg: BackMsg) -> None:
        if self._ws is None or self._closed_reason is not None:
            raise ConnectionError(f"session closed ({self._closed_reason or 'not connected'})")
        await self._ws.send(msg.SerializeToString())

    # --------------------------------------------------------------------- reading
    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for raw in self._ws:
                self._handle(ForwardMsg.FromString(raw))
        except Exception as exc:  # whatever ends the reader fails the waiting run at once
            self._closed_reason = f"{type(exc).__name__}: {exc}"
        else:
            self._closed_reason = "closed by the server"
        done = self._run.done
        if done is not None and not done.done():
            done.set_exception(ConnectionError(f"session closed ({self._closed_reason})"))

    def _handle(self, msg: ForwardMsg) -> None:
        if msg.WhichOneof("type") == "ref_hash":
            msg = self._from_cache(msg)
        elif msg.metadata.cacheable:
            self._remember(msg)
        handler = _HANDLERS.get(msg.WhichOneof("type") or "")
        if handler is not None:
            handler(self, msg)

    def _from_cache(self, ref: ForwardMsg) -> ForwardMsg:
        cached = ForwardMsg()
        cached.CopyFrom(self._cache[ref.ref_hash])
        cached.metadata.CopyFrom(ref.metadata)
        return cached

    def _remember(self, msg: ForwardMsg) -> None:
        self._cache[msg.hash] = msg
        if len(self._cache) > MAX_CACHED_MESSAGES:
            self._cache.pop(next(iter(self._cache)))

    def _on_new_session(self, msg: ForwardMsg) -> None:
        session = msg.new_session
        self.session_id = session.initialize.session_id or self.session_id
        self._set_pages(session.app_pages)
        self.page_hash = session.page_script_hash or self.page_hash
        self._run.run_id = msg.metadata.run.script_run_id
        if not msg.metadata.run.fragment_ids:  # a full run starts from an empty page
            self._run.elements = {}
            self.auto_reruns.clear()

    def _set_pages(self, pages: Sequence[Any]) -> None:
        for page in pages:
            self.pages[page.page_name] = Page(
                page.page_script_hash, page.page_name, page.url_pathname
            )

    def _on_delta(self, msg: ForwardMsg) -> None:
        if msg.delta.WhichOneof("type") == "new_element":
            self._run.elements[tuple(msg.metadata.delta_path)] = msg.delta.new_element

    def _on_finished(self, msg: ForwardMsg) -> None:
        status = _FINAL.get(msg.script_finished)  # None: FINISHED_EARLY_FOR_RERUN, a run follows
        done = self._run.done
        ours = self._run.run_id is not None and msg.metadata.run.script_run_id == self._run.run_id
        if status is not None and ours and done is not None and not done.done():
            done.set_result(status)
        elif status is not None:
            self.ignored_finishes += 1  # a run nobody waits for (diagnostics only)

    def _on_file_urls(self, msg: ForwardMsg) -> None:
        response = msg.file_urls_response
        future = self._file_urls.pop(response.response_id, None)
        if future is None or future.done():
            return
        if response.error_msg:
            future.set_exception(ConnectionError(f"upload refused: {response.error_msg}"))
        else:
            future.set_result(response.file_urls[0])


_HANDLERS: dict[str, Callable[[StreamlitSession, ForwardMsg], None]] = {
    "new_session": StreamlitSession._on_new_session,
    "navigation": lambda s, m: s._set_pages(m.navigation.app_pages),
    "delta": StreamlitSession._on_delta,
    "script_finished": StreamlitSession._on_finished,
    "auto_rerun": lambda s, m: s.auto_reruns.__setitem__(
        m.auto_rerun.fragment_id, m.auto_rerun.interval
    ),
    "stop_auto_rerun": lambda s, m: [
        s.auto_reruns.pop(i, None) for i in m.stop_auto_rerun.fragment_ids
    ],
    "file_urls_response": StreamlitSession._on_file_urls,
}
