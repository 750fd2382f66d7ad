"""Flask: guard views with a decorator; refusals, readiness and key start-up wired once.

Install with the ``flask`` extra (``grelmicro[flask]``: Flask and the
``jwt`` extra, nothing of FastAPI, Starlette, Redis or OpenTelemetry).

Example:
    >>> from flask import Flask
    >>> from grelmicro.jwt import JWTVerifier
    >>> from grelmicro.jwt.flask import JWTAuth, current_claims
    >>> verifier = JWTVerifier(discover="https://idp.example.com/realms/shop",
    ...                        audience="orders")  # doctest: +SKIP
    >>> auth = JWTAuth(verifier, realm="orders", role_claims="realm_access.roles")  # doctest: +SKIP
    >>> app = Flask(__name__)  # doctest: +SKIP
    >>> auth.init_app(app)  # doctest: +SKIP
    >>> @app.get("/orders")  # doctest: +SKIP
    ... @auth.require(scopes=["orders:read"], roles=["clerk"])
    ... def orders():
    ...     return {"owner": current_claims().subject}

:meth:`JWTAuth.init_app` registers the handlers that answer a refusal
(401 with the RFC 6750 challenge, 403 ``insufficient_scope``, 503 with
``Retry-After`` the key source's real time to its next attempt; RFC 9457
problem bodies), also for a :class:`~grelmicro.jwt.TokenRejectedError`,
:class:`~grelmicro.jwt.KeysUnavailableError` or
:class:`~grelmicro.jwt.AccessDeniedError` a view raises itself (from
``claims.require(...)`` or ``require_scopes``); adds the ``/ready`` view
and calls :meth:`JWTVerifier.start_sync`, so keys are loaded before the
first request. Under ``gunicorn --preload`` call ``verifier.start_sync()``
in gunicorn's ``post_fork`` hook too (the deployment guide says why).

Verification runs in the request's thread; a token whose key must be
fetched waits at most the verifier's ``key_wait`` (1 s by default), then
gets a 503: no worker thread hangs on a provider that does not answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from flask import Flask, Response, g, jsonify, request

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.challenges import Refusal
from grelmicro.jwt.errors import AccessDeniedError, KeysUnavailableError, TokenRejectedError
from grelmicro.jwt.guard import Guard
from grelmicro.jwt.wsgi import guard_arguments

__all__ = ["JWTAuth", "current_claims"]

F = TypeVar("F", bound=Callable[..., Any])

_CLAIMS = "grelmicro_jwt_claims"


def current_claims() -> Claims:
    """The verified claims of the current request (inside a guarded view).

    Raises:
        RuntimeError: the view is not guarded by :meth:`JWTAuth.require`, or
            the request was anonymous (``optional=True``).
    """
    claims = g.get(_CLAIMS)
    if claims is None:
        raise RuntimeError("no verified token: guard the view with @auth.require()")
    return cast("Claims", claims)


def _answer(refusal: Refusal) -> Response:
    return Response(
        refusal.body(),
        status=refusal.status_code,
        headers=refusal.header_list(),
    )


class JWTAuth:
    """The Flask extension: a :class:`~grelmicro.jwt.guard.Guard` and its app wiring.

    Args:
        verifier: the :class:`~grelmicro.jwt.JWTVerifier` (or a ``Guard``).
        app: set this app up now (or call :meth:`init_app` later).
        public_url: the origin clients address, for DPoP ``htu``.
        ready_path: the readiness view's path (``None``: none).
        start: call ``verifier.start_sync()`` in :meth:`init_app`.
        **options: :class:`~grelmicro.jwt.guard.Guard` options (``realm``,
            ``retry_after``, ``permissions``, ``role_claims``, ``dpop``).
    """

    def __init__(
        self,
        verifier: JWTVerifier | Guard,
        app: Flask | None = None,
        *,
        public_url: str | None = None,
        ready_path: str | None = "/ready",
        start: bool = True,
        **options: Any,
    ) -> None:
        self.guard = verifier if isinstance(verifier, Guard) else Guard(verifier, **options)
        self.public_url = public_url
        self.ready_path = ready_path
        self.start = start
        if app is not None:
            self.init_app(app)

    def __repr__(self) -> str:
        return f"JWTAuth({self.guard!r})"

    def init_app(self, app: Flask) -> None:
        """Register the refusal handlers and the readiness view; start the keys."""
        app.extensions["grelmicro.jwt"] = self
        app.register_error_handler(Refusal, _answer)
        guard = self.guard
        for error in (TokenRejectedError, KeysUnavailableError, AccessDeniedError):
            app.register_error_handler(error, lambda exc: _answer(guard.answer(exc)))
        if self.ready_path is not None:
            app.add_url_rule(self.ready_path, "grelmicro_jwt_ready", self.readiness)
        if self.start:
            guard.verifier.start_sync()

    def readiness(self) -> Response:
        """The readiness view: 200 once keys are loaded, else 503 with ``Retry-After``."""
        answer = self.guard.readiness()
        out = jsonify(answer.body)
        out.status_code = answer.status_code
        out.headers.update(answer.headers)
        return out

    def authenticate(
        self,
        *,
        scopes: Sequence[str] = (),
        roles: Sequence[str] = (),
        tenants: Sequence[str] = (),
    ) -> Claims:
        """The current request's verified claims, with these grants; raises a :class:`Refusal`."""
        return self.guard.authenticate(
            **guard_arguments(request.environ, self.public_url),
            scopes=scopes,
            roles=roles,
            tenants=tenants,
        )

    def require(
        self,
        *,
        scopes: Sequence[str] = (),
        roles: Sequence[str] = (),
        tenants: Sequence[str] = (),
        optional: bool = False,
    ) -> Callable[[F], F]:
        """A view decorator: the request's token must verify and grant ``scopes`` and ``roles``.

        ``optional=True`` lets an anonymous request in (:func:`current_claims`
        then raises; ``flask.g.grelmicro_jwt_claims`` is ``None``); a token
        that is sent is still verified. The claims are :func:`current_claims`.
        """
        scopes, roles, tenants = tuple(scopes), tuple(roles), tuple(tenants)

        def decorate(view: F) -> F:
            @functools.wraps(view)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                claims = None
                if not (optional and "HTTP_AUTHORIZATION" not in request.environ):
                    claims = self.authenticate(scopes=scopes, roles=roles, tenants=tenants)
                setattr(g, _CLAIMS, claims)
                return view(*args, **kwargs)

            return cast("F", guarded)

        return decorate
