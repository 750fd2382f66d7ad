"""FastAPI glue: a dependency that guards routes with a :class:`JWTVerifier`.

Example:
    >>> from fastapi import Depends, FastAPI, Security
    >>> from grelmicro.jwt import Claims, JWTVerifier
    >>> from grelmicro.jwt.fastapi import JWTBearer
    >>> verifier = JWTVerifier(jwks_url=..., audience="https://api.example.com")  # doctest: +SKIP
    >>> auth = JWTBearer(verifier, realm="api")  # doctest: +SKIP
    >>> app = FastAPI(lifespan=auth.lifespan)  # doctest: +SKIP
    >>> auth.install(app)  # doctest: +SKIP
    >>> @app.get("/items")  # doctest: +SKIP
    ... def items(claims: Claims = Security(auth, scopes=["read:items"])) -> Claims:
    ...     return claims

The dependency answers as RFC 6750 says a bearer-token resource server must:

- no credentials, or another scheme: 401 ``WWW-Authenticate: Bearer``;
- a refused token: 401 ``Bearer error="invalid_token", error_description="<reason>"``
  where the reason is the stable :attr:`TokenRejectedError.reason`;
- a missing scope (checked only once the token verified): 403
  ``Bearer error="insufficient_scope", scope="..."``; a missing role
  (``auth.require_roles(...)``): 403 with ``error_description="insufficient-role"``;
- a token bound by a ``cnf`` method no binding of the dependency checks:
  401 ``invalid_token`` (``unchecked-binding``, ``dpop-binding`` for DPoP);
- two tokens (two ``Authorization`` headers, header and query string) or an
  empty one: 400 ``Bearer error="invalid_request"``;
- no keys to verify with: 503 with ``Retry-After``.

With :meth:`JWTBearer.install` the bodies are RFC 9457 problem details
(``application/problem+json``) carrying the same reason. Verification runs
inline on the event loop: a verification (or a cache hit) costs far less than a
hop to a worker thread. This package is the only part of ``grelmicro.jwt``
that imports FastAPI (``grelmicro.jwt.fastapi_dpop``, the former home of the
DPoP classes, re-exports them from here).

DPoP (RFC 9449): :class:`DPoPBearer` is a :class:`JWTBearer` whose
:class:`DPoPBinding` checks DPoP-bound tokens and their proofs.

The package, top down: ``_dpop`` (DPoP: its binding and bearer),
``_bearer`` (the flow), ``_bindings`` (checks of sender-constrained
tokens), ``_presentation`` (reading the credentials), ``_challenges``
(refusals and problem bodies), ``_app`` (app wiring).
"""

from grelmicro.jwt.errors import REASONS, TokenRejectedError
from grelmicro.jwt.fastapi._app import check_routes
from grelmicro.jwt.fastapi._bearer import JWTBearer
from grelmicro.jwt.fastapi._bindings import (
    Binding,
    BoundRequest,
    CertificateBinding,
    certificate_thumbprint,
)
from grelmicro.jwt.fastapi._challenges import BearerError, problem_response
from grelmicro.jwt.fastapi._dpop import DPoPBearer, DPoPBinding
from grelmicro.jwt.fastapi._presentation import SUBPROTOCOL, Presentation
from grelmicro.jwt.fastapi._swagger import SwaggerLogin

__all__ = [
    "SUBPROTOCOL",
    "BearerError",
    "Binding",
    "BoundRequest",
    "CertificateBinding",
    "DPoPBearer",
    "DPoPBinding",
    "JWTBearer",
    "Presentation",
    "SwaggerLogin",
    "certificate_thumbprint",
    "check_routes",
    "problem_response",
]

#: What a problem body says for each token refusal: each error class's own
#: ``detail`` (fixed text: never the verifier's message).
_DETAILS = {
    reason: cls.detail for reason, cls in REASONS.items() if issubclass(cls, TokenRejectedError)
}
