"""FastAPI glue for DPoP (RFC 9449): a binding that checks DPoP-bound tokens.

Example:
    >>> from fastapi import Depends, FastAPI
    >>> from grelmicro.jwt import Claims, DPoPVerifier, JWTVerifier
    >>> from grelmicro.jwt.fastapi import DPoPBearer
    >>> verifier = JWTVerifier(jwks_url=..., audience="https://api.example.com")  # doctest: +SKIP
    >>> auth = DPoPBearer(
    ...     verifier, DPoPVerifier("required"), public_url="https://api.example.com"
    ... )  # doctest: +SKIP
    >>> app = FastAPI()  # doctest: +SKIP
    >>> auth.install(app)  # doctest: +SKIP
    >>> @app.get("/items")  # doctest: +SKIP
    ... def items(claims: Claims = Depends(auth)) -> Claims:
    ...     return claims

:class:`DPoPBinding` is what ``JWTBearer(verifier, bindings=[...])`` plugs in:
it reads ``Authorization: DPoP <token>`` and the ``DPoP`` proof header (and,
when the mode accepts them, lets ``Authorization: Bearer`` through), then
applies :meth:`DPoPVerifier.check` once the token verified.
:class:`DPoPBearer` is a :class:`~grelmicro.jwt.fastapi.JWTBearer` with that
binding and a ``DPoP`` OpenAPI scheme. Refusals answer as RFC 9449 §7.1 says:

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

A proof's ``htu`` is compared with the origin the client addressed, which
the app must be told: ``public_url`` (``https://api.example.com``; behind a
proxy that terminates TLS too), or ``allowed_hosts`` (the request's scheme
and ``Host``, when ``Host`` is one of them), or ``trust_host_header=True``
(the request's ``Host`` as it comes: only when a proxy in front sets it).
Without one of them a proof made for another origin would be accepted when
the client names that origin in ``Host``, so building refuses.

Both classes are re-exported by :mod:`grelmicro.jwt.fastapi`; the former
home ``grelmicro.jwt.fastapi_dpop`` re-exports the same objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from fastapi.openapi.models import HTTPBase as HTTPBaseModel
from starlette.requests import HTTPConnection
from starlette.types import Scope

from grelmicro.jwt._calls import run_async, run_sync
from grelmicro.jwt._claims import Claims
from grelmicro.jwt._config import check_flags
from grelmicro.jwt._confirmation import JKT
from grelmicro.jwt._core import normalize_htu
from grelmicro.jwt._dpop import DPoPRequest, DPoPSteps, DPoPVerifier
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.challenges import DPOP, Challenges, Refusal
from grelmicro.jwt.errors import (
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
)
from grelmicro.jwt.fastapi._bearer import JWTBearer
from grelmicro.jwt.fastapi._bindings import Binding, BoundRequest
from grelmicro.jwt.fastapi._presentation import Presentation
from grelmicro.jwt.otel import Reporter, dpop_checked, dpop_reporter

__all__ = ["DPoPBearer", "DPoPBinding"]

#: Problem-body detail of RFC 9449's ``use_dpop_nonce`` (an answer, not an
#: error class; the other DPoP details are their error classes' own).
_DETAILS = {"use-dpop-nonce": "The DPoP proof must carry the server's nonce (see DPoP-Nonce)."}


_ACCEPTED = {"required": "DPoP only", "accepted": "DPoP or Bearer", "off": "Bearer only"}


def _origin(public_url: str) -> str:
    normal = normalize_htu(public_url)
    if normal is None or normal.count("/") != 3 or not normal.endswith("/"):
        raise ConfigurationError(
            "public_url must be an http(s) origin such as https://api.example.com"
        )
    return normal.rstrip("/")


def _hosts(allowed_hosts: Iterable[str]) -> frozenset[str]:
    if isinstance(allowed_hosts, str):
        allowed_hosts = [allowed_hosts]
    hosts = []
    for host in allowed_hosts:
        if not isinstance(host, str) or not host or any(c in host for c in "/ \t@?#"):
            raise ConfigurationError(
                "allowed_hosts are host names as clients send them in Host, "
                "such as 'api.example.com' or 'api.example.com:8443'"
            )
        hosts.append(host.lower())
    if not hosts:
        raise ConfigurationError("allowed_hosts needs at least one host")
    return frozenset(hosts)


class DPoPBinding(Binding):
    """Checks DPoP-bound tokens (``cnf.jkt``) and their proofs (RFC 9449).

    Args:
        dpop: the DPoP policy (default: ``DPoPVerifier("accepted")``).
        public_url: the origin clients address (``https://api.example.com``):
            ``htu`` is compared with it plus the request path.
        allowed_hosts: the ``Host`` values clients may address; ``htu`` is
            compared with the request's scheme and ``Host`` when it is one.
        trust_host_header: compare ``htu`` with the request's scheme and
            ``Host`` as they come (a proxy in front must set ``Host``).

    One of ``public_url``, ``allowed_hosts`` or ``trust_host_header=True``
    is needed unless the mode is ``"off"``.
    """

    method = JKT
    schemes: ClassVar[dict[bytes, str]] = {b"dpop": DPOP}

    def __init__(
        self,
        dpop: DPoPVerifier | None = None,
        *,
        public_url: str | None = None,
        allowed_hosts: Iterable[str] | None = None,
        trust_host_header: bool = False,
    ) -> None:
        if dpop is None:
            dpop = DPoPVerifier("accepted")
        if not isinstance(dpop, DPoPVerifier):
            raise ConfigurationError("dpop must be a DPoPVerifier")
        if not isinstance(trust_host_header, bool):
            raise ConfigurationError("trust_host_header must be True or False")
        given = [public_url is not None, allowed_hosts is not None, trust_host_header]
        if sum(given) > 1:
            raise ConfigurationError(
                "give one of public_url, allowed_hosts or trust_host_header=True"
            )
        if not any(given) and dpop.mode != "off":
            raise ConfigurationError(
                "DPoP proofs name the URL they were made for (htu), so the app must know "
                "the origin clients address: pass public_url='https://api.example.com', "
                "or allowed_hosts=['api.example.com'], or trust_host_header=True when a "
                "proxy in front sets the Host header"
            )
        self.dpop = dpop
        self.public_url = None if public_url is None else _origin(public_url)
        self.allowed_hosts = None if allowed_hosts is None else _hosts(allowed_hosts)
        self.trust_host_header = trust_host_header
        #: Where checks are counted (set by DPoPBearer when its verifier has telemetry).
        self.telemetry: Reporter | None = None

    def __repr__(self) -> str:
        return f"DPoPBinding(mode={self.dpop.mode!r})"

    def configure(self, challenges: Challenges) -> None:
        """Add the ``DPoP`` challenge; the mode says which schemes an anonymous request hears."""
        nonces = self.dpop.nonces
        challenges.add_dpop(
            self.dpop.algorithms, self.dpop.mode, None if nonces is None else nonces.current
        )

    def read(
        self, scope: Scope, presentation: Presentation, challenges: Challenges
    ) -> Presentation:
        """The ``DPoP`` proof header (two of them are refused)."""
        proofs = [raw for name, raw in scope["headers"] if name == b"dpop"]
        if not proofs:
            return presentation
        if len(proofs) > 1:
            raise self._proof_refused(challenges, DPoPProofError.reason)
        return presentation._replace(proof=proofs[0])

    def _uri(self, connection: HTTPConnection, challenges: Challenges) -> str:
        """The request URI as the client addressed it (``htu``)."""
        scope = connection.scope
        if self.public_url is not None:
            path = str(scope.get("root_path", "")) + str(scope["path"])
            return self.public_url + (path if path.startswith("/") else "/" + path)
        if self.allowed_hosts is not None:
            host = connection.headers.get("host", "").lower()
            if host not in self.allowed_hosts:
                raise self._proof_refused(challenges, DPoPProofError.reason)
        url = str(connection.url)
        if url.startswith("ws"):  # a websocket handshake is an http(s) GET
            url = "http" + url[2:]
        return url

    def check(self, request: BoundRequest) -> None:
        """The DPoP proof, and the token's binding to its key (RFC 9449 §4.3, §7)."""
        run_sync(self._steps(request), self.dpop._record)

    async def check_async(self, request: BoundRequest) -> None:
        """:meth:`check`, awaiting a replay store that has ``record_async`` (a shared one)."""
        await run_async(self._steps(request), self.dpop._record_async)

    def _steps(self, request: BoundRequest) -> DPoPSteps:
        """The check as steps: :meth:`DPoPVerifier._steps`, its refusals answered."""
        presentation, challenges = request.presentation, request.challenges
        scheme = presentation.scheme
        if scheme != DPOP and self.dpop.mode != "required" and request.bound.jkt is None:
            return  # a plain bearer token where bearer tokens are accepted
        try:
            yield from self.dpop._steps(
                **self._arguments(request.connection, presentation, request.claims, challenges)
            )
        except (DPoPProofError, DPoPReplayError, DPoPBindingError) as exc:
            raise self._refused(challenges, exc) from None
        if self.telemetry is not None:  # nothing paid per accepted proof without telemetry
            self.telemetry.dpop_checked(None)

    def _arguments(
        self,
        connection: HTTPConnection,
        presentation: Presentation,
        claims: Claims,
        challenges: Challenges,
    ) -> DPoPRequest:
        """What :meth:`DPoPVerifier.check` reads of the request."""
        scheme = presentation.scheme
        return {
            "scheme": scheme,
            "access_token": presentation.token,
            "claims": claims,
            "proof": presentation.proof,
            "method": connection.scope.get("method", "GET"),
            "uri": self._uri(connection, challenges) if scheme == DPOP else "",
        }

    def _refused(
        self, challenges: Challenges, exc: DPoPProofError | DPoPReplayError | DPoPBindingError
    ) -> Refusal:
        dpop_checked(self.telemetry, exc)  # telemetry (otel.py)
        return challenges.answer(exc, DPOP)

    def _proof_refused(self, challenges: Challenges, reason: str) -> Refusal:
        return challenges.proof_refused(reason)


class DPoPBearer(JWTBearer):
    """A :class:`JWTBearer` with a :class:`DPoPBinding` and a ``DPoP`` OpenAPI scheme.

    Use it exactly like :class:`JWTBearer` (``Depends(auth)``,
    ``Security(auth, scopes=[...])``, ``auth.install(app)``).

    Args:
        verifier: the :class:`JWTVerifier` that checks every access token.
        dpop: the DPoP policy (default: ``DPoPVerifier("accepted")``).
        public_url: the origin clients address (``https://api.example.com``),
            used for ``htu`` instead of the request's scheme and host.
        allowed_hosts: or the ``Host`` values clients may address.
        trust_host_header: or ``True`` to take ``Host`` as it comes (a proxy
            in front sets it).
        bindings: other bindings (``CertificateBinding``) checked too.
        **options: the other :class:`JWTBearer` options (``realm``,
            ``scheme_name``, ``description``, ``permissions``,
            ``role_claims``, ``retry_after``, ``auto_error``).
    """

    def __init__(
        self,
        verifier: JWTVerifier,
        dpop: DPoPVerifier | None = None,
        *,
        public_url: str | None = None,
        allowed_hosts: Sequence[str] | None = None,
        trust_host_header: bool = False,
        bindings: Iterable[Binding] = (),
        **options: Any,
    ) -> None:
        # The bearer's own flags first: their message is the one to see.
        check_flags(
            **{name: options[name] for name in ("permissions", "auto_error") if name in options}
        )
        binding = DPoPBinding(
            dpop,
            public_url=public_url,
            allowed_hosts=allowed_hosts,
            trust_host_header=trust_host_header,
        )
        super().__init__(verifier, bindings=(binding, *bindings), **options)
        binding.telemetry = dpop_reporter(verifier, binding.dpop)
        self.dpop = binding.dpop
        self.public_url = binding.public_url
        mode = binding.dpop.mode
        if options.get("scheme_name") is None:
            self.scheme_name = "DPoP"
        algs = " ".join(binding.dpop.algorithms)
        self.model = HTTPBaseModel(
            scheme="DPoP" if mode != "off" else "bearer",
            description=options.get("description")
            or (
                f"Access token as `Authorization: DPoP <token>` with a `DPoP` proof header "
                f"(RFC 9449; proof algorithms: {algs}); accepted: {_ACCEPTED[mode]}."
            ),
        )

    def __repr__(self) -> str:
        return f"DPoPBearer({self.scheme_name!r}, mode={self.dpop.mode!r})"
