"""The intake API under load: throughput, latency, durability through kill -9, and a fuzz run.

    .venv/bin/python -m bench.bench_intake [--model models/NAME] [--phases throughput latency
        durability fuzz] [--complaints 2000] [--durability-complaints 10000] [--kills 5]
        [--json-out FILE] [--force]

Everything lives in a temporary folder: its own review store and models folder, and a model
(the bundled MiniLM, quick recipe, trained on 1,500 demo complaints with the project's CLI unless
--model), promoted live; the API is `python -m core serve` on a free loopback port.

- throughput: complaints per second posted in batches of 50 (two clients, so the server never
  waits on the network) with 1 and 2 workers, against the same model's in-process
  `classification_columns` on the same texts in the same run (the named baseline; goal: the API
  keeps at least 80% of it).
- latency: single-complaint requests, p50 and p99, at 1, 4 and 16 concurrent clients, idle and
  while a full training (`python -m core train`) runs beside the server, at the priority the
  app's job queue gives trainings (nice 10; `--training-nice 0` for a training at the API's own
  priority) (goal: p99 at 4 clients no more than twice idle).
- durability: a client posts N demo complaints in batches of 20, retrying each batch (same ids)
  until answered, while the server (2 workers) is killed with SIGKILL and restarted at random
  moments; afterwards the inbox must hold exactly N records, each id once, and every answer the
  client received must match the stored record.
- fuzz: schemathesis (a development requirement; its CLI) generates requests
  from the OpenAPI schema with a valid token; the check is "no 500s".

The machine's load is recorded before and after (bench.machine); a busy start is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.bench_load import free_port
from bench.machine import LoadGuard, machine, print_load, refuse_busy_start
from core.intake.schemas import RATE_ENV
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BATCH = 50


@dataclass
class Sandbox:
    folder: Path
    env: dict[str, str]
    token: str
    model: str

    @property
    def db(self) -> Path:
        return self.folder / "data" / "lens.db"


def cli(env: dict[str, str], *args: str, timeout: float = 1800) -> str:
    done = subprocess.run(
        [PYTHON, "-m", "core", *args], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"`core {' '.join(args)}` failed: {done.stderr[-800:]}")
    return done.stdout


def make_sandbox(model: str | None) -> Sandbox:
    folder = Path(tempfile.mkdtemp(prefix="bench-intake-"))
    env = {
        **os.environ, DATA_DIR_ENV: str(folder / "data"), MODELS_DIR_ENV: str(folder / "models"),
        RATE_ENV: "1000000",  # the bench measures the server, not the per-token rate limit
    }  # fmt: skip
    (folder / "models").mkdir()
    if model:
        name = Path(model).name
        shutil.copytree(model, folder / "models" / name)
    else:
        name = "intake-bench"
        cli(env, "demo-data", str(folder / "train.csv"), "--rows", "1500", "--seed", "1")
        cli(env, "train", str(folder / "train.csv"), "--out", str(folder / "models" / name),
            "--recipe", "quick")  # fmt: skip
    cli(env, "promote", name, "--reason", "intake benchmark")
    token = cli(env, "token", "create", "bench", "--scopes", "submit,read").strip()
    return Sandbox(folder, env, token, name)


class Server:
    """`python -m core serve` in its own process group (so kill -9 takes its workers too)."""

    def __init__(self, box: Sandbox, workers: int) -> None:
        self.box, self.workers, self.port = box, workers, free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> None:
        self.process = subprocess.Popen(
            [PYTHON, "-m", "core", "serve", "--port", str(self.port), "--workers",
             str(self.workers)],
            env=self.box.env, cwd=ROOT, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/v1/ready", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise RuntimeError("the API did not become ready")

    def kill(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


def demo_texts(n: int, seed: int = 7) -> list[str]:
    from core.data.demo import DemoConfig, generate_demo_data

    return generate_demo_data(DemoConfig(rows=n, seed=seed))["text"].astype(str).tolist()


def in_process_rates(box: Sandbox, texts: list[str]) -> tuple[float, float]:
    """The named baseline, complaints per second of the model's own classify columns in a
    process of its own: the whole file at once (as `classify` runs), and the same texts in the
    API's batches of 50 (each sorted by length and cut into passes of 8, as the API does)."""
    code = (
        "import sys, time, json; from core.models.registry import load_model;"
        "from core.models.classify import classification_columns;"
        f"m = load_model({str(box.folder / 'models' / box.model)!r});"
        "texts = json.load(open(sys.argv[1])); classification_columns(m, texts[:50]);"
        "t = time.perf_counter(); classification_columns(m, texts);"
        "whole = len(texts) / (time.perf_counter() - t); t = time.perf_counter();"
        f"[classification_columns(m, texts[i:i + {BATCH}], batch_size=8)"
        f" for i in range(0, len(texts), {BATCH})];"
        "print(whole, len(texts) / (time.perf_counter() - t))"
    )
    path = box.folder / "texts.json"
    path.write_text(json.dumps(texts))
    out = subprocess.run([PYTHON, "-c", code, str(path)], env=box.env, cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    whole, batched = out.stdout.strip().splitlines()[-1].split()
    return float(whole), float(batched)


def post_batches(url: str, token: str, texts: list[str], prefix: str, clients: int = 2) -> float:
    """Complaints per second posting `texts` in batches of BATCH from `clients` threads."""
    batches = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    headers = {"Authorization": f"Bearer {token}"}

    def send(index: int) -> None:
        body = {"complaints": [{"id": f"{prefix}-{index}-{j}", "text": t}
                               for j, t in enumerate(batches[index])]}  # fmt: skip
        with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
            response = client.post("/v1/complaints", json=body)
            response.raise_for_status()

    send_warm = {"complaints": [{"id": f"{prefix}-warm", "text": texts[0]}]}
    httpx.post(f"{url}/v1/complaints", json=send_warm, headers=headers, timeout=60)
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, range(len(batches))))
    return len(texts) / (time.perf_counter() - start)


def throughput(box: Sandbox, texts: list[str]) -> dict:
    baseline, batched = in_process_rates(box, texts)
    result = {
        "texts": len(texts), "in_process_per_s": round(baseline, 1),
        "in_process_batches_of_50_per_s": round(batched, 1),
    }  # fmt: skip
    for workers in (1, 2):
        server = Server(box, workers)
        server.start()
        try:
            rate = post_batches(server.url, box.token, texts, f"tp{workers}")
        finally:
            server.stop()
        result[f"api_{workers}_workers_per_s"] = round(rate, 1)
        result[f"api_{workers}_workers_ratio"] = round(rate / baseline, 3)
        result[f"api_{workers}_workers_ratio_to_batches"] = round(rate / batched, 3)
    return result


def latencies(url: str, token: str, texts: list[str], clients: int, per_client: int) -> list[float]:
    headers = {"Authorization": f"Bearer {token}"}
    tag = f"lat{clients}-{random.randrange(10**9)}"

    def run(client_index: int) -> list[float]:
        seen = []
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            for i in range(per_client):
                text = texts[(client_index * per_client + i) % len(texts)]
                body = {"complaints": [{"id": f"{tag}-{client_index}-{i}", "text": text}]}
                start = time.perf_counter()
                client.post("/v1/complaints", json=body).raise_for_status()
                seen.append(time.perf_counter() - start)
        return seen

    with ThreadPoolExecutor(clients) as pool:
        return [s for chunk in pool.map(run, range(clients)) for s in chunk]


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"n": len(ordered), "p50_ms": round(1000 * statistics.median(ordered), 1),
            "p99_ms": round(1000 * p99, 1)}  # fmt: skip


def latency(box: Sandbox, texts: list[str], per_client: int, training_nice: int) -> dict:
    server = Server(box, 1)
    server.start()
    result: dict = {"idle": {}, "training": {}, "training_nice": training_nice}
    latencies(server.url, box.token, texts, 1, 5)  # the first passes warm the kernels up
    try:
        for clients in (1, 4, 16):
            result["idle"][clients] = percentiles(
                latencies(server.url, box.token, texts, clients, per_client)
            )
        # At the priority the app's job queue gives a training (QueueConfig.heavy_nice: 10);
        # `--training-nice 0` measures a training started at the API's own priority.
        train = subprocess.Popen(
            ["nice", "-n", str(training_nice), PYTHON, "-m", "core", "train",
             str(box.folder / "train.csv"), "--out", str(box.folder / "models" / "during"),
             "--recipe", "full", "--epochs", "1"],
            env=box.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(20)  # past its imports and data loading: into the training steps
        for clients in (1, 4, 16):
            if train.poll() is not None:
                result["training"]["note"] = "the training ended before this level"
                break
            result["training"][clients] = percentiles(
                latencies(server.url, box.token, texts, clients, per_client)
            )
        train.kill()
        train.wait()
    finally:
        server.stop()
    idle4, loaded4 = result["idle"][4]["p99_ms"], result["training"].get(4, {}).get("p99_ms")
    result["p99_ratio_at_4"] = None if loaded4 is None else round(loaded4 / idle4, 2)
    return result


def durability(box: Sandbox, n: int, kills: int) -> dict:
    texts = demo_texts(n, seed=11)
    ids = [f"dur-{i}" for i in range(n)]
    batches = [list(range(i, min(n, i + 20))) for i in range(0, n, 20)]
    server = Server(box, 2)
    server.start()
    received: dict[str, dict] = {}
    done = threading.Event()
    retries = 0

    def client() -> None:
        nonlocal retries
        headers = {"Authorization": f"Bearer {box.token}"}
        for batch in batches:
            body = {"complaints": [{"id": ids[i], "text": texts[i]} for i in batch]}
            while True:
                try:
                    response = httpx.post(f"{server.url}/v1/complaints", json=body,
                                          headers=headers, timeout=60)  # fmt: skip
                    if response.status_code == 200:
                        for answer in response.json()["results"]:
                            received[answer["id"]] = answer
                        break
                except httpx.TransportError:
                    pass
                retries += 1
                time.sleep(0.2)
        done.set()

    worker = threading.Thread(target=client)
    worker.start()
    rng = random.Random(5)
    killed = 0
    while killed < kills and not done.is_set():
        time.sleep(rng.uniform(2.0, 12.0))
        if done.is_set():
            break
        server.kill()
        killed += 1
        server.start()
    worker.join()
    server.stop()
    return {"complaints": n, "kills": killed, "client_retries": retries,
            **check_inbox(box, ids, received)}  # fmt: skip


def check_inbox(box: Sandbox, ids: list[str], received: dict[str, dict]) -> dict:
    from core.review.store import Store

    with Store.open(box.db) as store:
        rows = store.query(
            "SELECT external_id, id, desk, confidence, model FROM inbox WHERE external_id"
            " LIKE 'dur-%'"
        )
        intact = store.verify_chains().intact
    stored = {r[0]: r for r in rows}
    mismatched = [
        i for i, a in received.items()
        if i not in stored or (a["complaint_id"], a["desk"]) != (stored[i][1], stored[i][2])
        or abs(a["confidence"] - stored[i][3]) > 1e-9
    ]  # fmt: skip
    return {
        "records": len(rows), "distinct_ids": len(stored), "answers": len(received),
        "missing": len(set(ids) - set(stored)), "answers_not_matching": len(mismatched),
        "chain_intact": intact,
        "ok": len(rows) == len(ids) == len(stored) == len(received) and not mismatched and intact,
    }  # fmt: skip


def fuzz(box: Sandbox, examples: int) -> dict:
    tool = Path(PYTHON).with_name("schemathesis")
    if not tool.exists():
        return {"skipped": "schemathesis is not installed: make test installs requirements-dev.txt"}
    server = Server(box, 1)
    server.start()
    try:
        run = subprocess.run(
            [str(tool), "run", f"{server.url}/openapi.json", "-H",
             f"Authorization: Bearer {box.token}", "--checks", "not_a_server_error",
             "--max-examples", str(examples), "--generation-deterministic"],
            capture_output=True, text=True, timeout=900, cwd=box.folder,
        )  # fmt: skip
    finally:
        server.stop()
    tail = run.stdout[-3000:]
    return {"exit_code": run.returncode, "summary": tail}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a saved model folder (default: train MiniLM quick)")
    parser.add_argument("--phases", nargs="+",
                        default=["throughput", "latency", "durability", "fuzz"])  # fmt: skip
    parser.add_argument("--complaints", type=int, default=2000)
    parser.add_argument("--per-client", type=int, default=40)
    parser.add_argument("--durability-complaints", type=int, default=10_000)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--fuzz-examples", type=int, default=100)
    parser.add_argument("--training-nice", type=int, default=10)
    parser.add_argument("--json-out")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    guard = LoadGuard.start(force=args.force, descendants=True)
    if refuse_busy_start(guard):
        return 1
    box = make_sandbox(args.model)
    if args.model:  # the latency phase trains beside the server on this file
        cli(box.env, "demo-data", str(box.folder / "train.csv"), "--rows", "1500")
    texts = demo_texts(args.complaints)
    report: dict = {"machine": machine(), "model": box.model}
    if "throughput" in args.phases:
        report["throughput"] = throughput(box, texts)
        print(json.dumps(report["throughput"]), flush=True)
    if "latency" in args.phases:
        report["latency"] = latency(box, texts, args.per_client, args.training_nice)
        print(json.dumps(report["latency"]), flush=True)
    if "durability" in args.phases:
        report["durability"] = durability(box, args.durability_complaints, args.kills)
        print(json.dumps(report["durability"]), flush=True)
    if "fuzz" in args.phases:
        report["fuzz"] = fuzz(box, args.fuzz_examples)
        print(report["fuzz"]["summary"] if "summary" in report["fuzz"] else report["fuzz"])
    load = guard.finish()
    report["machine_load"] = load.to_json()
    print_load(load)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2, default=str))
    shutil.rmtree(box.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
