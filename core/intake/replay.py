"""Replay a complaint file into the intake API at a steady rate, as the bank's systems would post
it: for demos (the board and the triage queue fill live) and for tests.

Each complaint is posted on its own (a batch of one) with the id `PREFIX-ROW`, received now; a
retry of a failed post sends the same id, so a retried complaint is stored once. The file is
read by the app's own intake (any CSV, XLSX or Parquet it accepts); without a file, the built-in
demo data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError

DEFAULT_URL = "http://127.0.0.1:8600"
RETRIES = 5  # per complaint, for a server restarting or briefly over its rate limit


@dataclass(frozen=True)
class ReplayConfig:
    url: str = DEFAULT_URL
    token: str = ""
    rate: float = 2.0  # complaints per second
    limit: int | None = None  # at most this many complaints
    prefix: str = "replay"
    channel: str = "replay"


@dataclass(frozen=True)
class ReplayReport:
    posted: int
    duplicates: int
    refused: int
    seconds: float
    desks: dict[str, int]

    def to_json(self) -> dict:
        return dict(self.__dict__)


def replay_texts(path: str | Path | None, text_col: str | None = None) -> list[str]:
    """The complaint texts of `path` (the demo data when None), in file order."""
    if path is None:
        from core.data.demo import generate_demo_data

        table = generate_demo_data()
        return table["text"].astype(str).tolist()
    from core.data.columns import detect_text_column
    from core.data.intake import load_table

    table = load_table(Path(path))
    column, _ = detect_text_column(table, text_col=text_col)
    return table[column].fillna("").astype(str).tolist()


def replay(
    texts: list[str],
    config: ReplayConfig,
    *,
    on_answer: Callable[[int, dict], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    client: Any = None,
) -> ReplayReport:
    """Post `texts` one by one at `config.rate` per second; returns what the API answered.
    `client`: an httpx.Client to post with (tests pass FastAPI's TestClient); default: one for
    `config.url` with the token."""
    import httpx

    if config.rate <= 0:
        raise UserError("--rate must be above 0 complaints per second")
    if not config.token:
        raise UserError("give an API token with the submit scope: --token or GRIEVANCE_LENS_TOKEN")
    headers = {"Authorization": f"Bearer {config.token}"}
    start, desks = time.monotonic(), {}
    posted = duplicates = refused = 0
    if client is None:
        client = httpx.Client(base_url=config.url, timeout=60.0)
    client.headers.update(headers)
    with client:
        for row, text in _numbered(texts, config.limit):
            item = {"id": f"{config.prefix}-{row}", "text": text, "channel": config.channel}
            answer = _post_one(client, item, sleep)
            posted += 1
            if "error" in answer:
                refused += 1
            else:
                duplicates += bool(answer.get("duplicate"))
                desks[answer["desk"]] = desks.get(answer["desk"], 0) + 1
            if on_answer is not None:
                on_answer(row, answer)
            _pace(start, posted, config.rate, sleep)
    return ReplayReport(posted, duplicates, refused, round(time.monotonic() - start, 3), desks)


def _numbered(texts: list[str], limit: int | None) -> Iterator[tuple[int, str]]:
    for index, text in enumerate(texts[:limit] if limit else texts):
        yield index + 2, text  # spreadsheet rows: the header is row 1


def _post_one(client: Any, item: dict, sleep: Callable[[float], None]) -> dict:
    import httpx

    for attempt in range(RETRIES):
        try:
            response = client.post("/v1/complaints", json={"complaints": [item]})
        except httpx.TransportError as exc:
            if attempt == RETRIES - 1:
                where = client.base_url
                raise UserError(f"cannot reach the intake API at {where} ({exc})") from exc
            sleep(min(2.0**attempt, 10.0))
            continue
        if response.status_code in (429, 503) and attempt < RETRIES - 1:
            sleep(float(response.headers.get("retry-after", "1")))
            continue
        body = _json(response)
        if response.status_code != 200:
            raise UserError(f"the intake API answered {response.status_code}: {body.get('error')}")
        return body["results"][0]
    raise AssertionError("unreachable")


def _json(response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {"error": response.text[:200]}
    return body if isinstance(body, dict) else {"error": str(body)[:200]}


def _pace(start: float, done: int, rate: float, sleep: Callable[[float], None]) -> None:
    """Sleep until `done` complaints are due at `rate` per second since `start`."""
    ahead = start + done / rate - time.monotonic()
    if ahead > 0:
        sleep(ahead)
