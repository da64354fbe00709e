"""Start the intake API: `python -m core serve` (and `make run`, beside the app).

The same exposure rule as the app (core.exposure): a non-loopback address needs sign-in
configured or GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC=1, and every data request needs a
token either way. `--workers N` runs N processes on the one store (uvicorn's workers); each
loads the model once, in the app's lifespan, and computes on one thread (`inference_threads`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from core.errors import UserError
from core.exposure import (
    ALLOW_PUBLIC_ENV,
    allows_public,
    exposure_error,
    read_launch,
    streamlit_folders,
)
from core.intake.schemas import MODEL_ENV

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8600


@dataclass(frozen=True)
class ServeConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    model: str = "live"
    workers: int = 1


def serve_refusal(config: ServeConfig) -> str | None:
    """Why the API must not start on `config.host` (one line), or None."""
    launch = read_launch([], os.environ, folders=streamlit_folders())
    refusal = exposure_error(
        config.host, auth_configured=launch.auth is not None, allow_public=allows_public(os.environ)
    )
    if refusal is None:
        return None
    return (
        f"the intake API would listen on {config.host} while the app has no sign-in; serve on "
        "127.0.0.1 (the default), configure sign-in ([auth] in .streamlit/secrets.toml), or set "
        f"{ALLOW_PUBLIC_ENV}=1 on a trusted network (tokens are needed either way)"
    )


THREADS_ENV = "GRIEVANCE_LENS_API_THREADS"


def inference_threads(environ: dict[str, str] | None = None) -> int:
    """Torch threads per API process (GRIEVANCE_LENS_API_THREADS, default 1). One: a process
    routes one complaint as fast on one core as on two (16 ms), batches nearly as fast (162 a
    second against 171), and a training beside it leaves its latency alone (p99 at 4 clients
    1.65 times idle, against 2.25 with two threads); more throughput comes from --workers."""
    raw = (os.environ if environ is None else environ).get(THREADS_ENV, "").strip() or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= 256:
        raise UserError(f"{THREADS_ENV}={raw[:20]!r}: give a whole number from 1 to 256")
    return int(raw)


def app_from_env():
    """uvicorn's factory in each worker process: the settings from the environment."""
    import torch

    from core.intake.api import create_app

    torch.set_num_threads(inference_threads())
    return create_app()


def serve(config: ServeConfig) -> None:
    """Run the API until interrupted (blocks)."""
    import uvicorn

    if not 1 <= config.workers <= 64:
        raise UserError(f"--workers must be 1 to 64, got {config.workers}")
    if not 1 <= config.port <= 65535:
        raise UserError(f"--port must be 1 to 65535, got {config.port}")
    refusal = serve_refusal(config)
    if refusal:
        raise UserError(refusal)
    # OpenMP threads that sleep when a pass ends instead of spinning for the next one: between
    # short passes the cores go to the request's own work (one complaint: p50 15 ms instead of
    # 28, p90 22 instead of 117; batches as fast). Set before torch loads; the operator's wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OMP_NUM_THREADS", str(inference_threads()))
    os.environ[MODEL_ENV] = config.model  # the workers read their settings from the environment
    print(
        f"intake API on http://{config.host}:{config.port} (docs at /docs; Ctrl-C stops it)",
        file=sys.stderr,
    )
    uvicorn.run(
        "core.intake.serve:app_from_env", factory=True, host=config.host, port=config.port,
        workers=config.workers, log_level="warning", access_log=False,
    )  # fmt: skip
