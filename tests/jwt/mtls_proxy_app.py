"""An app that believes a certificate header from one proxy, for ``uvicorn`` in a child process.

``uvicorn mtls_proxy_app:app`` (with ``tests/jwt`` and ``tests`` on the path):
the header ``X-Client-Cert`` is believed from 127.0.0.2 only. The tests of
issue 38 (N29) start it with uvicorn's proxy-header flags.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI
from forge import SECRET

from grelmicro.jwt import Claims, JWTVerifier, Key
from grelmicro.jwt.fastapi import CertificateBinding, JWTBearer

auth = JWTBearer(
    JWTVerifier([Key.secret(SECRET)]),
    bindings=[CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=["127.0.0.2"])],
)
app = FastAPI()


@app.get("/items")
def items(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
    return {"sub": claims.subject}
