"""The load test's protocol client (bench.streamlit_client) against a scripted socket: how runs
are assembled from ForwardMsgs, which widget values go back, and what a reader sees."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Common_pb2 import FileUploaderState, UploadedFileInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from bench.streamlit_client import CLICK, StreamlitSession, _displayed, _widget_state
from ui.safe import md_escape

BOX = "$$ID-abc-classify.text"
SUBMIT = "FormSubmitter:classify.one-Classify"


def new_session(run_id: str) -> ForwardMsg:
    msg = ForwardMsg()
    msg.new_session.initialize.session_id = "session-1"
    page = msg.new_session.app_pages.add()
    page.page_script_hash, page.page_name = "hash-classify", "Classify"
    msg.metadata.run.script_run_id = run_id
    return msg


def delta(path: tuple[int, ...], **element: object) -> ForwardMsg:
    msg = ForwardMsg()
    msg.metadata.delta_path.extend(path)
    ((kind, fields),) = element.items()
    for name, value in fields.items():
        setattr(getattr(msg.delta.new_element, kind), name, value)
    return msg


def finished(run_id: str, status: int = ForwardMsg.FINISHED_SUCCESSFULLY) -> ForwardMsg:
    msg = ForwardMsg(script_finished=status)
    msg.metadata.run.script_run_id = run_id
    return msg


def alert(run: int) -> ForwardMsg:
    """A large alert: sent whole and cacheable the first time, by reference afterwards."""
    if run > 1:
        ref = ForwardMsg(ref_hash="alert-hash")
        ref.metadata.delta_path.extend((0, 2))
        return ref
    msg = delta((0, 2), alert={"body": md_escape("Saved: item #7 confirmed as UPI-Dispute.")})
    msg.hash, msg.metadata.cacheable = "alert-hash", True
    return msg


def classify_page(run: int) -> list[ForwardMsg]:
    """A late finish of an older run, then one run of a page with a form and an alert."""
    run_id = f"run-{run}"
    return [
        finished("old-run"),
        new_session(run_id),
        delta((0, 0), text_area={"id": BOX, "label": "Complaint", "form_id": "classify.one"}),
        delta((0, 1), button={"id": SUBMIT, "label": "Classify", "form_id": "classify.one"}),
        alert(run),
        finished(run_id, ForwardMsg.FINISHED_EARLY_FOR_RERUN),  # st.rerun: wait on
        finished(run_id),
    ]


class ScriptedSocket:
    """Answers every BackMsg with the next scripted ForwardMsgs, as the server would."""

    def __init__(self, session: StreamlitSession) -> None:
        self.session, self.sent, self.runs = session, [], 0

    async def send(self, data: bytes) -> None:
        self.sent.append(BackMsg.FromString(data))
        self.runs += 1
        for msg in classify_page(self.runs):
            asyncio.get_running_loop().call_soon(self.session._handle, msg)


def test_runs_are_assembled_from_their_own_messages_and_values_go_back():
    async def scenario():
        session = StreamlitSession("http://127.0.0.1:1")
        socket = session._ws = ScriptedSocket(session)
        first = await session.rerun(timeout=5)
        box = first.widget(key="classify.text")
        submit = first.widget(form="classify.one", kind="button")
        second = await session.click(submit, values={box.id: "card blocked"}, timeout=5)
        await session.rerun(page="Classify", timeout=5)
        return session, socket, first, second

    # A thread of its own: a browser test earlier in this worker may hold Playwright's event
    # loop running on the main thread, where asyncio.run refuses to start another.
    with ThreadPoolExecutor(1) as pool:
        session, socket, first, second = pool.submit(asyncio.run, scenario()).result()
    assert first.status == "finished" and session.session_id == "session-1"
    assert session.ignored_finishes == 3  # each run's late finish of "old-run"
    assert first.alerts() == ["Saved: item #7 confirmed as UPI-Dispute."]
    assert first.has_text("item #7") and second.alerts() == first.alerts()  # from the cache
    assert second.find(label="Classify").id == SUBMIT
    assert list(socket.sent[1].rerun_script.cached_message_hashes) == ["alert-hash"]
    sent = [{w.id: w.WhichOneof("value") for w in m.rerun_script.widget_states.widgets}
            for m in socket.sent]  # fmt: skip
    assert sent == [{}, {BOX: "string_value", SUBMIT: "trigger_value"}, {BOX: "string_value"}]
    assert socket.sent[2].rerun_script.page_script_hash == "hash-classify"


def test_widget_values_take_the_field_the_frontend_uses():
    upload = FileUploaderState(uploaded_file_info=[UploadedFileInfo(name="a.csv", size=3)])
    cases = [
        (CLICK, "trigger_value"), (True, "bool_value"), (3, "int_value"),
        (0.5, "double_value"), ("x", "string_value"), (["a"], "string_array_value"),
        ((0.1, 0.9), "double_array_value"), (upload, "file_uploader_state_value"),
    ]  # fmt: skip
    for value, field in cases:
        assert _widget_state("w", value).WhichOneof("value") == field


def test_displayed_text_is_what_markdown_shows_of_an_escaped_string():
    for text in ["Validation report: Built-in demo data", "a@b.com https://x.y [x](y) #1 \\"]:
        assert _displayed(md_escape(text)) == text
