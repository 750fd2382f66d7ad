"""A plain WSGI middleware: every request's token checked before the app sees it.

For any WSGI app (Bottle, Falcon, Pyramid, a bare callable) served by
gunicorn, uWSGI or mod_wsgi. It needs nothing beyond ``grelmicro[jwt]``
(the ``wsgi`` extra is that). Flask and Django have their own modules
(:mod:`grelmicro.jwt.flask`, :mod:`grelmicro.jwt.django`), built on the same
:func:`guard_arguments` and :func:`respond`.

Example:
    >>> from grelmicro.jwt import JWTVerifier
    >>> from grelmicro.jwt.wsgi import JWTMiddleware
    >>> verifier = JWTVerifier(jwks_url=..., audience="https://api.example.com")  # doctest: +SKIP
    >>> application = JWTMiddleware(
    ...     app, verifier, realm="api", exempt=["/health"]
    ... )  # doctest: +SKIP

The verified :class:`~grelmicro.jwt.Claims` are in
``environ["grelmicro.jwt.claims"]`` (``None`` for an anonymous request the
middleware lets through with ``optional=True``); a route's own scope or
role check is ``middleware.guard.check(claims, scopes=[...])``, whose
:class:`~grelmicro.jwt.challenges.Refusal` :func:`respond` answers. A
refusal is answered by the middleware itself: status, ``WWW-Authenticate``,
``Retry-After`` on a 503, and an RFC 9457 problem body. ``ready_path``
(``/ready`` by default) answers readiness: 200 once keys are loaded.

With ``start=True`` (the default) the middleware calls
:meth:`JWTVerifier.start_sync` when it is built: keys are loaded before the
first request. A server that forks workers after loading the app
(``gunicorn --preload``) must call ``verifier.start_sync()`` again in each
worker (its ``post_fork`` hook): see the deployment guide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.challenges import Refusal
from grelmicro.jwt.guard import Guard, GuardedApp, GuardSettings, Readiness

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CLAIMS_KEY", "JWTMiddleware", "guard_arguments", "respond", "respond_ready"]

#: Where the middleware puts the verified claims in the WSGI environ.
CLAIMS_KEY = "grelmicro.jwt.claims"

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _status(code: int) -> str:
    return f"{code} {HTTPStatus(code).phrase}"


def guard_arguments(environ: dict[str, Any], public_url: str | None = None) -> dict[str, Any]:
    """What :meth:`Guard.authenticate` reads, taken from a WSGI ``environ``.

    ``uri`` (a DPoP proof's ``htu``) is ``public_url`` plus the request's
    path when given; otherwise the scheme and ``Host`` the request carries
    (trust that only behind a proxy that sets ``Host``).
    """
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    if public_url is not None:
        uri = public_url.rstrip("/") + path
    else:
        host = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "")
        uri = f"{environ.get('wsgi.url_scheme', 'http')}://{host}{path}"
    return {
        "authorization": environ.get("HTTP_AUTHORIZATION"),
        "query": environ.get("QUERY_STRING", ""),
        "proof": environ.get("HTTP_DPOP"),
        "method": environ.get("REQUEST_METHOD", "GET"),
        "uri": uri,
    }


def respond(refusal: Refusal, start_response: StartResponse) -> list[bytes]:
    """Answer ``refusal`` (status, headers, problem body) through WSGI's ``start_response``."""
    body = refusal.body()
    headers = [*refusal.header_list(), ("Content-Length", str(len(body)))]
    start_response(_status(refusal.status_code), headers)
    return [body]


def respond_ready(answer: Readiness, start_response: StartResponse) -> list[bytes]:
    """Answer a :func:`~grelmicro.jwt.guard.readiness` result as JSON."""
    import json  # noqa: PLC0415 - readiness probes only

    body = json.dumps(answer.body).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        *answer.headers.items(),
    ]
    start_response(_status(answer.status_code), headers)
    return [body]


class JWTMiddleware(GuardedApp):
    """Guards a WSGI app: a request without a good token never reaches it.

    Args:
        app: the WSGI app to guard.
        verifier: the :class:`~grelmicro.jwt.JWTVerifier`, or a
            :class:`~grelmicro.jwt.guard.Guard` built on one (then no guard
            settings are given).
        start: call ``verifier.start_sync()`` now.
        **settings: the route's and the guard's settings
            (:class:`~grelmicro.jwt.guard.GuardedApp` lists them).
    """

    def __init__(
        self,
        app: WSGIApp,
        verifier: JWTVerifier | Guard,
        *,
        start: bool = True,
        **settings: Unpack[GuardSettings],
    ) -> None:
        super().__init__(verifier, settings)
        self.app = app
        if start:
            self.guard.verifier.start_sync()

    def __repr__(self) -> str:
        return f"JWTMiddleware({self.app!r}, {self.guard!r})"

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """Check the request's token; call the app, or answer the refusal."""
        path = environ.get("PATH_INFO", "")
        if path == self.ready_path:
            return respond_ready(self.guard.readiness(), start_response)
        if path in self.exempt:
            return self.app(environ, start_response)
        claims: Claims | None = None
        try:
            if not (self.optional and not environ.get("HTTP_AUTHORIZATION")):
                claims = self.guard.authenticate(
                    **guard_arguments(environ, self.public_url),
                    scopes=self.scopes,
                    roles=self.roles,
                )
        except Refusal as refusal:
            return respond(refusal, start_response)
        environ[CLAIMS_KEY] = claims
        return self.app(environ, start_response)
