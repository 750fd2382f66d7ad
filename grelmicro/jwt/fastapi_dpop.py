"""FastAPI glue for DPoP (RFC 9449): a :class:`JWTBearer` that also takes DPoP-bound tokens.

Example:
    >>> from fastapi import Depends, FastAPI
    >>> from grelmicro.jwt import Claims, DPoPVerifier, JWTVerifier
    >>> from grelmicro.jwt.fastapi_dpop import DPoPBearer
    >>> verifier = JWTVerifier(jwks_url=..., audience="https://api.example.com")  # doctest: +SKIP
    >>> auth = DPoPBearer(verifier, DPoPVerifier("required"))  # doctest: +SKIP
    >>> app = FastAPI()  # doctest: +SKIP
    >>> auth.install(app)  # doctest: +SKIP
    >>> @app.get("/items")  # doctest: +SKIP
    ... def items(claims: Claims = Depends(auth)) -> Claims:
    ...     return claims

The dependency reads ``Authorization: DPoP <token>`` and the ``DPoP`` proof
header (and, when the mode accepts them, ``Authorization: Bearer``), verifies
the token, then applies :meth:`DPoPVerifier.check`. Refusals answer as RFC
9449 §7.1 says:

- no credentials: 401 ``WWW-Authenticate: DPoP algs="ES256 ..."`` (with the
  ``Bearer`` challenge before it when bearer tokens are accepted);
- a refused token sent with the DPoP scheme, or a token/scheme mismatch
  (``dpop-binding``): 401 ``DPoP error="invalid_token"``;
- a refused or replayed proof: 401 ``DPoP error="invalid_dpop_proof"``;
- a missing or stale server nonce: 401 ``DPoP error="use_dpop_nonce"`` with a
  fresh ``DPoP-Nonce`` header;
- a replay store full of live entries: 503 with ``Retry-After``.

Every ``error_description`` is the stable reason (``dpop-proof``,
``dpop-replay``, ``dpop-binding`` or a token reason), never the proof. The
OpenAPI document shows an HTTP security scheme named ``DPoP``.

Behind a proxy that terminates TLS, pass ``public_url`` (the origin clients
address, e.g. ``https://api.example.com``): ``htu`` is compared against it
plus the request path instead of the scheme and ``Host`` the app sees.
"""

from __future__ import annotations

from typing import Any

from fastapi.openapi.models import HTTPBase as HTTPBaseModel
from starlette.requests import HTTPConnection
from starlette.types import Scope

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._confirmation import JKT
from grelmicro.jwt._core import normalize_htu
from grelmicro.jwt._dpop import DPoPVerifier
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.errors import (
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
)
from grelmicro.jwt.fastapi import BearerError, JWTBearer, _quoted

__all__ = ["DPoPBearer"]

#: Problem-body details of the DPoP reasons (fixed text, never the proof).
_DETAILS = {
    "dpop-proof": "The DPoP proof was refused.",
    "dpop-replay": "The DPoP proof was used before.",
    "dpop-binding": "The access token is not presented with the key it is bound to.",
    "use-dpop-nonce": "The DPoP proof must carry the server's nonce (see DPoP-Nonce).",
}

_SCHEMES = {b"dpop": "DPoP", b"bearer": "Bearer"}


class DPoPBearer(JWTBearer):
    """A FastAPI dependency for DPoP-bound (and, if the mode says so, bearer) tokens.

    Use it exactly like :class:`JWTBearer` (``Depends(auth)``,
    ``Security(auth, scopes=[...])``, ``auth.install(app)``).

    Args:
        verifier: the :class:`JWTVerifier` that checks every access token.
        dpop: the DPoP policy (default: ``DPoPVerifier("accepted")``).
        public_url: the origin clients address (``https://api.example.com``),
            used for ``htu`` instead of the request's scheme and host.
        **options: the other :class:`JWTBearer` options (``realm``,
            ``scheme_name``, ``description``, ``permissions``, ``retry_after``,
            ``auto_error``).
    """

    def __init__(
        self,
        verifier: JWTVerifier,
        dpop: DPoPVerifier | None = None,
        *,
        public_url: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(verifier, **options)
        if dpop is None:
            dpop = DPoPVerifier("accepted")
        if not isinstance(dpop, DPoPVerifier):
            raise ConfigurationError("dpop must be a DPoPVerifier")
        if public_url is not None:
            normal = normalize_htu(public_url)
            if normal is None or normal.count("/") != 3 or not normal.endswith("/"):
                raise ConfigurationError(
                    "public_url must be an http(s) origin such as https://api.example.com"
                )
            public_url = normal.rstrip("/")
        self.dpop = dpop
        self.public_url = public_url
        realm = options.get("realm")
        algs = " ".join(dpop.algorithms)
        realm_part = "" if realm is None else f'realm="{_quoted(realm, "realm")}", '
        self._dpop_prefix = f"DPoP {realm_part}"
        self._algs = f'algs="{algs}"'
        if dpop.mode == "off":
            challenge = self._challenge
        elif dpop.mode == "required":
            challenge = f"{self._dpop_prefix}{self._algs}"
        else:
            challenge = f"{self._challenge}, {self._dpop_prefix}{self._algs}"
        self._challenge = challenge
        if self.scheme_name == "JWTBearer" and options.get("scheme_name") is None:
            self.scheme_name = "DPoP"
        accepted = {"required": "DPoP only", "accepted": "DPoP or Bearer", "off": "Bearer only"}
        self.model = HTTPBaseModel(
            scheme="DPoP" if dpop.mode != "off" else "bearer",
            description=options.get("description")
            or (
                f"Access token as `Authorization: DPoP <token>` with a `DPoP` proof header "
                f"(RFC 9449; proof algorithms: {algs}); accepted: {accepted[dpop.mode]}."
            ),
        )

    def __repr__(self) -> str:
        return f"DPoPBearer({self.scheme_name!r}, mode={self.dpop.mode!r})"

    # -- reading the request -----------------------------------------------------

    def _credentials(self, scope: Scope) -> tuple[str, bytes, bytes | None] | None:
        """``(scheme, token, proof)`` of the request, ``None`` without credentials."""
        authorization = self._authorization(scope)
        proofs = [raw for name, raw in scope["headers"] if name == b"dpop"]
        if len(proofs) > 1:
            raise self._proof_refused("dpop-proof")
        proof = proofs[0] if proofs else None
        if authorization is not None:
            scheme, _, rest = authorization.partition(b" ")
            if scheme.lower() == b"dpop":
                credentials = rest.lstrip(b" ")
                if not credentials:
                    raise self._invalid_request("empty-token", "The DPoP credentials are empty.")
                return "DPoP", credentials, proof
        # Bearer (or nothing): the bearer rules (query tokens, websocket subprotocol).
        token = self._token(scope)
        if token is None:
            return None
        return "Bearer", token, proof

    def _uri(self, connection: HTTPConnection) -> str:
        """The request URI as the client addressed it (``htu``)."""
        scope = connection.scope
        if self.public_url is not None:
            path = str(scope.get("root_path", "")) + str(scope["path"])
            return self.public_url + (path if path.startswith("/") else "/" + path)
        url = str(connection.url)
        if url.startswith("ws"):  # a websocket handshake is an http(s) GET
            url = "http" + url[2:]
        return url

    # -- checks ----------------------------------------------------------------------

    def _check_binding(
        self,
        connection: HTTPConnection,
        scheme: str,
        token: bytes,
        proof: bytes | None,
        claims: Claims,
    ) -> None:
        """The DPoP proof, and the token's binding to its key (RFC 9449 §4.3, §7)."""
        method = connection.scope.get("method", "GET")
        try:
            self.dpop.check(
                scheme=scheme,
                access_token=token,
                claims=claims,
                proof=proof,
                method=method,
                uri=self._uri(connection),
            )
        except DPoPProofError as exc:
            if exc.use_nonce:
                raise self._use_nonce() from None
            raise self._proof_refused(exc.reason) from None
        except DPoPReplayError as exc:
            if exc.store_full:
                raise self._unavailable(
                    "dpop-replay-store-full", "Too many DPoP proofs are in flight; try again later."
                ) from None
            raise self._proof_refused(exc.reason) from None
        except DPoPBindingError as exc:
            raise self._token_refused("DPoP", exc.reason) from None
        self._check_confirmation(claims, (JKT,))

    # -- refusals ----------------------------------------------------------------------

    def _token_refused(self, scheme: str, reason: str) -> BearerError:
        if scheme != "DPoP" and reason != "dpop-binding":
            return self._invalid_token(reason)
        return self._dpop_refusal(
            "invalid_token", reason, _DETAILS.get(reason, "The token was refused.")
        )

    def _proof_refused(self, reason: str) -> BearerError:
        return self._dpop_refusal(
            "invalid_dpop_proof", reason, _DETAILS.get(reason, "The DPoP proof was refused.")
        )

    def _use_nonce(self) -> BearerError:
        nonces = self.dpop.nonces
        assert nonces is not None  # noqa: S101 - only raised when nonces are on
        return self._dpop_refusal(
            "use_dpop_nonce",
            "use-dpop-nonce",
            _DETAILS["use-dpop-nonce"],
            headers={"DPoP-Nonce": nonces.current()},
        )

    def _dpop_refusal(
        self, error: str, reason: str, detail: str, headers: dict[str, str] | None = None
    ) -> BearerError:
        """A 401 with the DPoP challenge: ``DPoP error="<error>", error_description=..., algs``."""
        attributes = f'error_description="{reason}", {self._algs}'
        return self._refusal(
            401, error, reason, detail, attributes, prefix=self._dpop_prefix, headers=headers
        )
