"""The test issuer: keys, tokens, JWKS and a loopback server (see :mod:`grelmicro.jwt.testing`)."""

from __future__ import annotations

import collections
import contextlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from grelmicro.jwt._config import AlgorithmName
from grelmicro.jwt._demo import ALGORITHMS, HMAC_ALGORITHMS, signing_key
from grelmicro.jwt._demo import mint as compact
from grelmicro.jwt._keys import Key
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["ALGORITHMS", "AUDIENCE", "ISSUER", "SUBJECT", "ServedJWKS", "TestIssuer"]

#: The default ``iss`` (the ``.test`` domain is reserved: it never resolves).
ISSUER = "https://issuer.test/"
#: The default ``aud``.
AUDIENCE = "https://api.test"
#: The default ``sub``.
SUBJECT = "test-user"


def _json(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``value`` as a plain dict, refused (without echoing it) unless it is JSON."""
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"the {what} must hold JSON values only ({exc})") from None
    return dict(value)


def _scope(value: object) -> object:
    """A ``scope`` given as a list or set becomes the space-separated string (RFC 8693)."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    if isinstance(value, (list, tuple)):
        return " ".join(str(item) for item in value)
    return value


class TestIssuer:
    """A test identity provider: one signing key (rotatable), tokens, JWKS, a verifier.

    Args:
        algorithm: the signing algorithm; ES256 (fast to generate and to sign)
            unless the tests need another. RS*/PS* keys are RSA-2048, HS* a
            random secret of the hash's length.
        issuer: ``iss`` of the tokens, and the issuer the verifier expects.
        audience: ``aud`` of the tokens (a list puts a list in the token),
            and the audience the verifier expects.
        subject: the default ``sub``.
        kid: the key id (written in the JWKS and in every token's header).
        typ: the ``typ`` header; ``"at+jwt"`` for RFC 9068 access tokens.
        lifetime: seconds from ``iat`` to ``exp`` (default 300).
        clock: seconds since the epoch (default :func:`time.time`); the
            verifier built by :meth:`verifier` reads the same clock.
        claims: claims every token carries besides the registered ones
            (``{"tenant": "t1"}``); a token's own claims win.
    """

    __test__ = False  # a helper, not a test class (pytest collects Test* names)

    def __init__(
        self,
        algorithm: AlgorithmName = "ES256",
        *,
        issuer: str = ISSUER,
        audience: str | Sequence[str] = AUDIENCE,
        subject: str = SUBJECT,
        kid: str = "test-key-1",
        typ: str | None = "JWT",
        lifetime: float = 300,
        clock: Callable[[], float] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise ConfigurationError(
                f"TestIssuer signs with one of {', '.join(ALGORITHMS)}; got another name"
            )
        for name, value in (("issuer", issuer), ("subject", subject), ("kid", kid)):
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"{name} must be a non-empty string")
        if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)):
            raise ConfigurationError("lifetime must be a number of seconds")
        if clock is not None and not callable(clock):
            raise ConfigurationError("clock must be a callable returning seconds")
        self.issuer = issuer
        self.audience: str | tuple[str, ...] = (
            audience if isinstance(audience, str) else tuple(audience)
        )
        self.subject = subject
        self.typ = typ
        self.lifetime = lifetime
        self._clock = clock
        self._defaults = _json(claims or {}, "claims")
        self._keys = [signing_key(algorithm, kid)]

    def __repr__(self) -> str:
        return (
            f"TestIssuer({self.algorithm!r}, issuer={self.issuer!r}, "
            f"audience={self.audience!r}, kid={self.kid!r})"
        )

    # -- keys --------------------------------------------------------------

    @property
    def algorithm(self) -> str:
        """The algorithm tokens are signed with."""
        return self._keys[-1].algorithm

    @property
    def kid(self) -> str:
        """The ``kid`` of the current signing key."""
        return self._keys[-1].kid

    @property
    def key(self) -> Key:
        """The current signing key's verification key (public, or the HMAC secret)."""
        return self._keys[-1].key

    @property
    def keys(self) -> list[Key]:
        """Every published verification key: the current one, and those kept by :meth:`rotate`."""
        return [signing.key for signing in self._keys]

    @property
    def private_key(self) -> Any:
        """The current ``cryptography`` private key (the secret ``bytes`` for HS*)."""
        return self._keys[-1].private

    @property
    def secret(self) -> bytes:
        """The HMAC secret of an HS* issuer (to configure a service under test)."""
        private = self._keys[-1].private
        if not isinstance(private, bytes):
            raise ConfigurationError(f"a {self.algorithm} issuer has a key pair, not a secret")
        return private

    @property
    def jwks(self) -> dict[str, Any]:
        """The JWKS document: every published public key (a fresh copy each time)."""
        if any(signing.jwk is None for signing in self._keys):
            raise ConfigurationError(
                f"a {self.algorithm} issuer publishes no JWKS (a published secret is no "
                "secret): build the verifier with issuer.verifier() or Key.secret(issuer.secret)"
            )
        return {"keys": [dict(signing.jwk) for signing in self._keys if signing.jwk is not None]}

    def rotate(
        self, algorithm: AlgorithmName | None = None, *, kid: str | None = None, keep: bool = True
    ) -> str:
        """Sign with a new key from now on; returns its ``kid``.

        With ``keep`` (the default) the previous keys stay in the JWKS, as a
        provider publishes the next key before using it and the old one until
        its tokens expire; ``keep=False`` withdraws them.
        """
        algorithm = algorithm or self.algorithm  # type: ignore[assignment]
        if algorithm not in ALGORITHMS:
            raise ConfigurationError(f"TestIssuer signs with one of {', '.join(ALGORITHMS)}")
        if keep and (algorithm in HMAC_ALGORITHMS) != (self.algorithm in HMAC_ALGORITHMS):
            raise ConfigurationError(
                "rotate() keeps the published keys: a secret and key pairs cannot be "
                "published together; pass keep=False to switch kinds"
            )
        kid = kid or f"test-key-{len(self._keys) + 1}"
        if kid in {signing.kid for signing in self._keys} and keep:
            raise ConfigurationError("kid is already published; pick another")
        signing = signing_key(str(algorithm), kid)
        self._keys = [*self._keys, signing] if keep else [signing]
        return kid

    # -- tokens ------------------------------------------------------------

    def now(self) -> float:
        """The issuer's clock, in seconds since the epoch."""
        return (self._clock or time.time)()

    def claims(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """The payload :meth:`mint` signs (same arguments, no header)."""
        issued = int(self.now() if now is None else now)
        lifetime = self.lifetime if expires_in is None else expires_in
        audience = self.audience if isinstance(self.audience, str) else list(self.audience)
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience,
            "sub": self.subject,
            "iat": issued,
            "exp": int(issued + lifetime),
            "jti": secrets.token_hex(16),
            **self._defaults,
            **(claims or {}),
            **more,
        }
        if "scope" in payload:
            payload["scope"] = _scope(payload["scope"])
        return _json(
            {name: value for name, value in payload.items() if value is not None}, "claims"
        )

    def mint(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        header: Mapping[str, Any] | None = None,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> str:
        """A signed token: the default claims, then ``claims``, then keywords.

        Defaults: ``iss``, ``aud``, ``sub`` from the issuer, ``iat`` now,
        ``exp`` ``lifetime`` seconds later (or ``expires_in``; negative is
        already expired), a random ``jti``. A claim given as ``None`` is
        left out (``mint(sub=None)``). ``scope`` may be a list
        (space-joined). ``header`` adds or replaces header members over
        ``alg``, ``typ`` and ``kid`` (``None`` removes one), e.g.
        ``header={"kid": "other"}``. ``now`` pins ``iat`` (default: the
        clock). A claim whose name is a parameter (``header``, ``now``)
        goes in the ``claims`` mapping.
        """
        payload = self.claims(claims, now=now, expires_in=expires_in, **more)
        signing = self._keys[-1]
        head: dict[str, Any] = {"alg": signing.algorithm, "typ": self.typ, "kid": signing.kid}
        head.update(_json(header or {}, "header"))
        head = {name: value for name, value in head.items() if value is not None}
        return compact(head, payload, signing.sign)

    def expired(
        self, claims: Mapping[str, Any] | None = None, /, *, ago: float = 60, **more: Any
    ) -> str:
        """A token whose ``exp`` passed ``ago`` seconds ago (issued ``lifetime`` before that)."""
        issued = self.now() - ago - self.lifetime
        return self.mint(claims, now=issued, **more)

    def bearer(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        header: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, str]:
        """``{"Authorization": "Bearer <token>"}`` for a request; arguments as :meth:`mint`."""
        return {"Authorization": f"Bearer {self.mint(claims, header=header, **more)}"}

    # -- what a service under test is given ----------------------------------

    def verifier(self, **options: Any) -> JWTVerifier:
        """A :class:`JWTVerifier` that trusts this issuer's keys, with its ``iss`` and ``aud``.

        ``options`` are :class:`JWTVerifier` keywords (``required=``,
        ``typ=``, ``leeway=``, ``cache_size=``...) and override the issuer's
        ``audience``/``issuer``. The verifier reads the issuer's clock. The
        keys are given in code (no HTTP); to test fetching, see
        :meth:`transport` and :meth:`serve`.
        """
        if "config" not in options:
            options.setdefault("issuer", self.issuer)
            options.setdefault("audience", self.audience)
        if self._clock is not None:
            options.setdefault("clock", self._clock)
        return JWTVerifier(self.keys, **options)

    @property
    def jwks_url(self) -> str:
        """Where :meth:`transport` serves the JWKS: ``<issuer>/.well-known/jwks.json``."""
        return self.issuer.rstrip("/") + "/.well-known/jwks.json"

    @property
    def discovery_url(self) -> str:
        """Where :meth:`transport` serves the OpenID Connect discovery document."""
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def discovery_document(self, jwks_url: str | None = None) -> dict[str, Any]:
        """The OpenID Connect discovery document (``issuer``, ``jwks_uri``)."""
        return {
            "issuer": self.issuer,
            "jwks_uri": jwks_url or self.jwks_url,
            "id_token_signing_alg_values_supported": sorted({k.algorithm for k in self._keys}),
        }

    def transport(self) -> httpx.MockTransport:
        """An httpx transport answering :attr:`jwks_url` and :attr:`discovery_url`.

        ``JWTVerifier(jwks_url=issuer.jwks_url, client=httpx.AsyncClient(
        transport=issuer.transport()))``, or ``discover=issuer.issuer``: the
        verifier's fetching, caching and refresh run with no socket. The
        answers follow :meth:`rotate`; any other URL answers 404.
        """
        self.jwks  # noqa: B018 - an HS* issuer has none: refused here, not on first fetch
        return httpx.MockTransport(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url.copy_with(query=None))
        if request.method != "GET":
            return httpx.Response(405)
        if url == self.jwks_url:
            return _response(self.jwks)
        if url == self.discovery_url:
            return _response(self.discovery_document())
        return httpx.Response(404)

    def _document(self, path: str, base: str) -> Mapping[str, Any] | None:
        """What the loopback server at ``base`` answers at ``path`` (None: 404)."""
        if path == "/jwks.json":
            return self.jwks
        if path == "/.well-known/openid-configuration":
            return self.discovery_document(base + "/jwks.json")
        return None

    @contextlib.contextmanager
    def serve(self, *, as_issuer: bool = False, port: int = 0) -> Iterator[ServedJWKS]:
        """Serve the JWKS from a real HTTP server on 127.0.0.1 (a random port, or ``port``).

        ``with issuer.serve() as server: JWTVerifier(jwks_url=server.jwks_url,
        allow_insecure_loopback=True, ...)``. The server answers what
        :attr:`jwks` holds at each request (so :meth:`rotate` shows), counts
        its requests, and stops when the block ends.

        With ``as_issuer=True`` the server is the issuer: inside the block,
        :attr:`issuer` is ``server.issuer`` (``http://127.0.0.1:<port>/``),
        in the tokens and in the discovery document, so
        ``JWTVerifier(discover=server.issuer, allow_insecure_loopback=True)``
        works (discovery needs the document's ``issuer`` to be where it is
        served from). The previous ``issuer`` is restored afterwards.

        ``port`` fixes the port (a service under test configured before the
        server starts, or in another process); a port in use is refused
        with a :class:`~grelmicro.jwt.ConfigurationError`.
        """
        self.jwks  # noqa: B018 - an HS* issuer has none: refused here, not on first fetch
        server = ServedJWKS(self, port=port)
        previous = self.issuer
        if as_issuer:
            self.issuer = server.issuer
        try:
            yield server
        finally:
            self.issuer = previous
            server.stop()


def _response(body: Mapping[str, Any]) -> httpx.Response:
    data = json.dumps(body).encode()
    return httpx.Response(
        200,
        # A stream, as from the network: the verifier reads the raw body in chunks.
        stream=httpx.ByteStream(data),
        headers={
            "Content-Type": "application/json",
            "Content-Length": str(len(data)),
            "Cache-Control": "max-age=300",
        },
    )


class ServedJWKS:
    """A running loopback HTTP server publishing a :class:`TestIssuer`'s JWKS.

    Built by :meth:`TestIssuer.serve`. ``jwks_url`` is the JWKS;
    ``discovery_url`` a discovery document whose ``jwks_uri`` points here
    (its ``issuer`` is the test issuer's: see ``as_issuer``); ``requests``
    counts the GETs, ``paths`` counts them per path (query left out).
    """

    def __init__(self, issuer: TestIssuer, *, port: int = 0) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigurationError("port is 0 (any free port) or a port number up to 65535")
        self.requests = 0
        self.paths: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with lock:
                    outer.requests += 1
                    outer.paths[path] += 1
                body = issuer._document(path, outer.url)
                data = b"not found" if body is None else json.dumps(body).encode()
                self.send_response(404 if body is None else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "max-age=300")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        try:
            self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve on 127.0.0.1:{port} ({exc.strerror or type(exc).__name__})"
            ) from None
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="grelmicro-test-jwks", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The server's base URL, ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def issuer(self) -> str:
        """``http://127.0.0.1:<port>/``: the issuer a discovery here must name."""
        return self.url + "/"

    @property
    def jwks_url(self) -> str:
        """The JWKS URL (plain http on loopback: pass ``allow_insecure_loopback=True``)."""
        return self.url + "/jwks.json"

    @property
    def discovery_url(self) -> str:
        """The discovery document's URL."""
        return self.url + "/.well-known/openid-configuration"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
