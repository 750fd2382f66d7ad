"""The service under soak: ``examples/fastapi_service.py`` with keys from a JWKS URL.

Run by uvicorn (``--factory service:build``, two workers) with its settings in
the environment: ``SOAK_JWKS_URL``, ``SOAK_ISSUER``, ``SOAK_AUDIENCE`` and
``SOAK_FETCH`` (JSON of :class:`~grelmicro.jwt.FetchOptions` fields). Each
worker appends ``?worker=<pid>`` to the JWKS URL (the provider counts fetches
per worker), answers with an ``X-Soak-Worker`` header, and reports its
verifier's ``health()`` at ``/soak/health``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from grelmicro.jwt import FetchOptions, JWTVerifier

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fastapi_service import build_app


class WorkerHeader:
    """ASGI middleware: every HTTP answer names the worker process that gave it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.header = (b"x-soak-worker", str(os.getpid()).encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), self.header]
            await send(message)

        await self.app(scope, receive, send_with_header)


def build() -> FastAPI:
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

    app.add_middleware(WorkerHeader)
    return app
