"""Django: a view decorator, a readiness view and a middleware, configured once in settings.

Install with the ``django`` extra (``grelmicro[django]``); Django REST
framework classes are in :mod:`grelmicro.jwt.drf` (``grelmicro[drf]``).

Example (``settings.py``, read once, at the first use)::

    GRELMICRO_JWT = {
        "VERIFIER": "orders.auth.verifier",  # a JWTVerifier, by dotted path
        "REALM": "orders",
        "ROLE_CLAIMS": "realm_access.roles",  # Keycloak
    }
    MIDDLEWARE = [..., "grelmicro.jwt.django.JWTMiddleware"]

and in the views and URLs::

    from grelmicro.jwt.django import ready, require

    @require(scopes=["orders:read"], roles=["clerk"])
    def orders(request):
        return JsonResponse({"owner": request.jwt_claims.subject})

    urlpatterns = [path("orders", orders), path("ready", ready)]

Settings keys: ``VERIFIER`` (required), ``REALM``, ``RETRY_AFTER``,
``PERMISSIONS``, ``ROLE_CLAIMS``, ``PUBLIC_URL`` (DPoP ``htu`` origin),
``DPOP`` (a ``DPoPVerifier`` by dotted path), ``START`` (default ``True``:
``verifier.start_sync()`` when the middleware loads, with the WSGI
application, so keys are loaded before the first request).
:class:`JWTMiddleware` also answers a :class:`~grelmicro.jwt.TokenRejectedError`,
:class:`~grelmicro.jwt.KeysUnavailableError` or
:class:`~grelmicro.jwt.AccessDeniedError` a view raises itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.module_loading import import_string

from grelmicro.jwt.challenges import Refusal
from grelmicro.jwt.errors import (
    AccessDeniedError,
    ConfigurationError,
    KeysUnavailableError,
    TokenRejectedError,
)
from grelmicro.jwt.guard import Guard
from grelmicro.jwt.wsgi import guard_arguments

__all__ = ["JWTMiddleware", "answer", "configured", "ready", "require"]

F = TypeVar("F", bound=Callable[..., Any])

_KEYS = {"VERIFIER", "REALM", "RETRY_AFTER", "PERMISSIONS", "ROLE_CLAIMS", "PUBLIC_URL"}
_KEYS |= {"DPOP", "START"}


class Configured:
    """``settings.GRELMICRO_JWT``, read once: the guard and the DPoP origin."""

    def __init__(self, guard: Guard, public_url: str | None) -> None:
        self.guard = guard
        self.public_url = public_url

    def __repr__(self) -> str:
        return f"Configured({self.guard!r})"


@functools.cache
def configured() -> Configured:
    """The :class:`~grelmicro.jwt.guard.Guard` built from ``settings.GRELMICRO_JWT`` (once).

    Raises:
        ConfigurationError: the setting is missing, names an unknown key, or
            ``VERIFIER`` is not a dotted path to a ``JWTVerifier``.
    """
    options = getattr(settings, "GRELMICRO_JWT", None)
    if not isinstance(options, dict) or "VERIFIER" not in options:
        raise ConfigurationError(
            "settings.GRELMICRO_JWT must be a dict naming the verifier: "
            "{'VERIFIER': 'myproject.auth.verifier'}"
        )
    unknown = set(options) - _KEYS
    if unknown:
        raise ConfigurationError(f"settings.GRELMICRO_JWT: unknown keys {sorted(unknown)}")
    verifier = options["VERIFIER"]
    if isinstance(verifier, str):
        verifier = import_string(verifier)
    dpop = options.get("DPOP")
    if isinstance(dpop, str):
        dpop = import_string(dpop)
    guard = Guard(
        verifier,
        realm=options.get("REALM"),
        retry_after=options.get("RETRY_AFTER", 5),
        permissions=options.get("PERMISSIONS", False),
        role_claims=options.get("ROLE_CLAIMS"),
        dpop=dpop,
    )
    if options.get("START", True):
        guard.verifier.start_sync()
    return Configured(guard, options.get("PUBLIC_URL"))


def answer(refusal: Refusal) -> HttpResponse:
    """A :class:`~grelmicro.jwt.challenges.Refusal` as a Django response (problem+json)."""
    response = HttpResponse(
        refusal.body(), status=refusal.status_code, content_type="application/problem+json"
    )
    for name, value in refusal.headers.items():
        response[name] = value
    return response


def require(
    *,
    scopes: Sequence[str] = (),
    roles: Sequence[str] = (),
    tenants: Sequence[str] = (),
) -> Callable[[F], F]:
    """A view decorator: the token must verify and grant ``scopes``, ``roles``, a tenant.

    The claims are ``request.jwt_claims``. A refusal is answered at once
    (401 with the challenge, 403, 503 with ``Retry-After``).
    """
    scopes, roles, tenants = tuple(scopes), tuple(roles), tuple(tenants)

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            setup = configured()
            try:
                claims = setup.guard.authenticate(
                    **guard_arguments(request.META, setup.public_url),
                    scopes=scopes,
                    roles=roles,
                    tenants=tenants,
                )
            except Refusal as refusal:
                return answer(refusal)
            request.jwt_claims = claims
            return view(request, *args, **kwargs)

        return cast("F", guarded)

    return decorate


def ready(request: HttpRequest) -> JsonResponse:  # noqa: ARG001 - a view
    """The readiness view: 200 once keys are loaded, else 503 with ``Retry-After``."""
    result = configured().guard.readiness()
    response = JsonResponse(result.body, status=result.status_code)
    for name, value in result.headers.items():
        response[name] = value
    return response


class JWTMiddleware:
    """Loads the keys with the app (``START``) and answers verifier errors views raise."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        configured()

    def __repr__(self) -> str:
        return "JWTMiddleware()"

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Pass the request on (the views check their own tokens)."""
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:  # noqa: ARG002
        """A refusal, or a verifier error a view raised, as its HTTP answer."""
        if isinstance(exception, Refusal):
            return answer(exception)
        if isinstance(exception, (TokenRejectedError, KeysUnavailableError, AccessDeniedError)):
            return answer(configured().guard.answer(exception))
        return None
