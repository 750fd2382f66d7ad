"""A DPoP-guarded app for the fleet tests, run by uvicorn in its own processes.

``uvicorn dpop_fleet_app:app`` (with ``tests/jwt`` and ``tests`` on the path):
the replay store is a :class:`RedisReplayStore` on ``GRELMICRO_TEST_REDIS``
when that is set, the in-process default otherwise (the contrast the tests
show); ``GRELMICRO_TEST_FALLBACK=1`` opts into the in-process fallback while
Redis is down; ``GRELMICRO_TEST_STORE_DEFAULTS=1`` keeps the store's own
timeout (the load test of ``bench/dpop_redis_bench.py``) and
``GRELMICRO_TEST_MAX_CONNECTIONS`` sets its pool. Access tokens are HS256
over the forge's secret; the clock is the real one. ``/items`` answers the pid of
the worker that accepted the request.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import Depends, FastAPI
from forge import SECRET

from grelmicro.jwt import Claims, DPoPVerifier, JWTVerifier, Key, RedisReplayStore, ReplayStore
from grelmicro.jwt.fastapi_dpop import DPoPBearer

ORIGIN = "https://api.example.com"

_url = os.environ.get("GRELMICRO_TEST_REDIS")
_options: dict[str, Any] = {"timeout": 0.5}
if os.environ.get("GRELMICRO_TEST_STORE_DEFAULTS"):
    _options = {}
if os.environ.get("GRELMICRO_TEST_MAX_CONNECTIONS"):
    _options["max_connections"] = int(os.environ["GRELMICRO_TEST_MAX_CONNECTIONS"])
store = (
    RedisReplayStore(
        _url,
        fallback=ReplayStore() if os.environ.get("GRELMICRO_TEST_FALLBACK") else None,
        **_options,
    )
    if _url
    else None
)
auth = DPoPBearer(
    JWTVerifier([Key.secret(SECRET)]),
    DPoPVerifier("required", replay_store=store),
    public_url=ORIGIN,
)
app = FastAPI()
auth.install(app)


@app.get("/items")
def items(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
    return {"sub": claims.subject, "pid": os.getpid()}
