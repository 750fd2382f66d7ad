"""A DPoP-guarded app for the fleet tests, run by uvicorn in its own processes.

``uvicorn dpop_fleet_app:app`` (with ``tests/jwt`` and ``tests`` on the path):
the replay store is a :class:`RedisReplayStore` on ``GRELMICRO_TEST_REDIS``
when that is set, the in-process default otherwise (the contrast the tests
show); ``GRELMICRO_TEST_FALLBACK=1`` opts into the in-process fallback while
Redis is down. Access tokens are HS256 over the forge's secret; the clock is
the real one (Redis and the workers share it). ``/items`` answers the pid of
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
store = (
    RedisReplayStore(
        _url,
        timeout=0.5,
        fallback=ReplayStore() if os.environ.get("GRELMICRO_TEST_FALLBACK") else None,
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
