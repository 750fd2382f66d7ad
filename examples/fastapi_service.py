"""A small FastAPI service guarded by ``grelmicro.jwt``.

``build_app(verifier)`` is the whole integration: one :class:`JWTBearer`,
the key lifespan and RFC 9457 problem bodies (``auth.install``), a readiness
route, and routes guarded with ``Depends``/``Security``. ``/dpop/items`` takes
DPoP-bound tokens only (RFC 9449: a proof signed by the client's key on every
request). ``/metrics`` answers in the Prometheus text format when
``prometheus_client`` is installed (``opentelemetry-exporter-prometheus``
brings it; the verifier reports to it with ``telemetry=``, see
``docs/observability.md``). ``fastapi_demo.py`` runs it under uvicorn with
keys generated at start.
"""

from typing import Annotated

from fastapi import Depends, FastAPI, Response, Security, WebSocket
from pydantic import BaseModel

from grelmicro.jwt import Claims, DPoPVerifier, JWTVerifier
from grelmicro.jwt.fastapi import DPoPBearer, JWTBearer


class Caller(BaseModel):
    """The claims this service relies on, typed."""

    sub: str
    scope: str = ""


def build_app(verifier: JWTVerifier) -> FastAPI:
    """The service: public ``/health``, ``/ready``; guarded ``/items``, ``/me``, ``/ws``."""
    auth = JWTBearer(verifier, realm="demo")
    app = FastAPI(title="grelmicro.jwt demo service")
    auth.install(app)  # keys loaded at startup, problem+json refusals
    app.add_api_route("/ready", auth.readiness, include_in_schema=False)

    # DPoP-bound tokens only; the same verifier checks the access token. The demo
    # runs on a loopback port of its own; a deployed service passes public_url=.
    dpop = DPoPBearer(verifier, DPoPVerifier("required"), realm="demo", trust_host_header=True)

    @app.get("/dpop/items")
    def dpop_items(claims: Annotated[Claims, Security(dpop, scopes=["read:items"])]) -> dict:
        return {
            "owner": claims.subject,
            "items": ["apple", "pear"],
            "bound_to": claims["cnf"]["jkt"],
        }

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    add_metrics_route(app)

    @app.get("/items")
    def list_items(claims: Annotated[Claims, Security(auth, scopes=["read:items"])]) -> dict:
        return {"owner": claims.subject, "items": ["apple", "pear"]}

    @app.get("/me")
    def me(claims: Annotated[Claims, Depends(auth)]) -> Claims:
        return claims

    @app.get("/caller")
    def caller(who: Annotated[Caller, Depends(auth.as_model(Caller))]) -> Caller:
        return who

    @app.websocket("/ws")
    async def echo(websocket: WebSocket, claims: Annotated[Claims, Depends(auth)]) -> None:
        await websocket.accept(subprotocol=auth.subprotocol(websocket))
        await websocket.send_text(f"hello {claims.subject}")
        await websocket.close()

    return app


def add_metrics_route(app: FastAPI) -> None:
    """``GET /metrics``: every metric of the process, as Prometheus scrapes them."""
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415
    except ImportError:  # no exporter installed: no /metrics
        return

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
