"""The service under soak: ``examples/fastapi_service.py`` with keys from a JWKS URL.

Run by uvicorn (``--factory service:build``), one process per worker, each on
its own port, with its settings in the environment: ``SOAK_JWKS_URL``,
``SOAK_ISSUER``, ``SOAK_AUDIENCE``, ``SOAK_FETCH`` (JSON of
:class:`~grelmicro.jwt.FetchOptions` fields) and ``SOAK_EVENTS`` (a folder).
Each worker appends ``?worker=<pid>`` to the JWKS URL (the provider counts
fetches per worker), answers with an ``X-Soak-Worker`` header, adds to every
503 an ``X-Soak-Health`` header (its verifier's ``health()`` as the 503 is
sent, a few fields as JSON: what the driver classifies the 503 by, with the
body's ``wait``), reports the whole ``health()`` at ``/soak/health``, and
writes the library's log
records (the ``grelmicro.jwt`` logger, INFO and up) to
``SOAK_EVENTS/worker-<pid>.jsonl``, one JSON object a line: ``t`` (the
process's ``time.monotonic()`` when written: the driver's clock too),
``worker``, ``level``, ``message`` and every ``jwt_*`` field of the record,
as a JSON log formatter would ship them. From these the driver learns when
the worker installed each ``kid`` (``keys.loaded``, ``keys.refreshed``) and
when its fetches failed; no private attribute is read.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from grelmicro.jwt import FetchOptions, JWTVerifier

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fastapi_service import build_app

#: The ``health()`` fields sent with a 503 (``X-Soak-Health``).
HEALTH_FIELDS = ("ready", "generation", "key_count", "last_success", "last_error", "config_error")


class SoakHeaders:
    """ASGI middleware: every answer names its worker; a 503 carries the verifier's health."""

    def __init__(self, app: Any, verifier: JWTVerifier) -> None:
        self.app = app
        self.verifier = verifier
        self.worker = (b"x-soak-worker", str(os.getpid()).encode())

    def health(self) -> tuple[bytes, bytes]:
        state = self.verifier.health()
        fields = {name: getattr(state, name) for name in HEALTH_FIELDS}
        return b"x-soak-health", json.dumps(fields, separators=(",", ":")).encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                added = [self.worker]
                if message.get("status") == 503:
                    added.append(self.health())
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class JSONLines(logging.Handler):
    """Each record as one JSON object a line: the ``jwt_*`` fields, when, which worker."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.INFO)
        self.file = path.open("a", encoding="utf-8", buffering=1)  # line-buffered
        self.worker = str(os.getpid())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = {
                "t": time.monotonic(),  # after the record was made: never before what it tells
                "worker": self.worker,
                "level": record.levelname,
                "message": record.getMessage(),
                **{k: v for k, v in vars(record).items() if k.startswith("jwt_")},
            }
            self.file.write(json.dumps(line, default=str) + "\n")
        except Exception:  # a log line must never break a request
            self.handleError(record)


def log_events(folder: str | None) -> None:
    if not folder:
        return
    logger = logging.getLogger("grelmicro.jwt")
    logger.addHandler(JSONLines(Path(folder) / f"worker-{os.getpid()}.jsonl"))
    logger.setLevel(logging.INFO)


def build() -> FastAPI:
    log_events(os.environ.get("SOAK_EVENTS"))
    verifier = JWTVerifier(
        jwks_url=f"{os.environ['SOAK_JWKS_URL']}?worker={os.getpid()}",
        allow_insecure_loopback=True,
        issuer=os.environ["SOAK_ISSUER"],
        audience=os.environ["SOAK_AUDIENCE"],
        fetch=FetchOptions(**json.loads(os.environ.get("SOAK_FETCH", "{}"))),
    )
    app = build_app(verifier)

    @app.get("/soak/health")
    def soak_health() -> dict[str, Any]:
        return {"pid": os.getpid(), **dataclasses.asdict(verifier.health())}

    app.add_middleware(SoakHeaders, verifier=verifier)
    return app
