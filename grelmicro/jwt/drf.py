"""Django REST framework: an authentication class and scope and role permissions.

Install with the ``drf`` extra (``grelmicro[drf]``). The guard is the one
:func:`grelmicro.jwt.django.configured` builds from ``settings.GRELMICRO_JWT``
(read once).

Example::

    # settings.py
    GRELMICRO_JWT = {"VERIFIER": "orders.auth.verifier", "REALM": "orders",
                     "ROLE_CLAIMS": "realm_access.roles"}
    REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["grelmicro.jwt.drf.JWTAuthentication"],
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    }

    # views.py
    from grelmicro.jwt.drf import require_roles, require_scopes

    class Orders(APIView):
        permission_classes = (require_scopes("orders:read"), require_roles("clerk"))

        def get(self, request):
            return Response({"owner": request.auth.subject})  # request.auth: the Claims

A request without a token gets DRF's 401 with the ``WWW-Authenticate``
challenge of :class:`JWTAuthentication`; a refused token, a missing scope
or role, or unavailable keys are raised as :class:`RefusalError`, which DRF's
default exception handler answers with the status, the challenge and, for a
503, ``Retry-After`` (the body is the RFC 9457 problem document).
"""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from grelmicro.jwt._claims import Claims
from grelmicro.jwt.challenges import Refusal
from grelmicro.jwt.django import configured
from grelmicro.jwt.wsgi import guard_arguments

__all__ = ["JWTAuthentication", "RefusalError", "TokenUser", "require_roles", "require_scopes"]


class RefusalError(APIException):
    """A :class:`~grelmicro.jwt.challenges.Refusal` as DRF raises it.

    DRF's exception handler reads ``auth_header`` (``WWW-Authenticate``) and
    ``wait`` (``Retry-After``); the other headers (``DPoP-Nonce``) are in
    :attr:`refusal`.
    """

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(detail=refusal.problem())
        # DRF made every member a string (ErrorDetail); RFC 9457's status is a number.
        self.detail = refusal.problem()
        self.refusal = refusal
        self.status_code = refusal.status_code
        self.auth_header = refusal.headers.get("WWW-Authenticate")
        retry = refusal.headers.get("Retry-After")
        self.wait = None if retry is None else int(retry)


class TokenUser:
    """``request.user`` of a verified token: authenticated, named by ``sub``; no database row."""

    is_authenticated = True
    is_anonymous = False
    is_active = True

    def __init__(self, claims: Claims) -> None:
        self.claims = claims
        self.username = claims.subject or ""
        self.pk = self.id = self.username

    def __str__(self) -> str:
        return self.username

    def __repr__(self) -> str:
        return f"TokenUser({self.username!r})"


class JWTAuthentication(BaseAuthentication):
    """``request.user`` a :class:`TokenUser`, ``request.auth`` the verified :class:`Claims`."""

    def authenticate(self, request: Request) -> tuple[TokenUser, Claims] | None:
        """The token's user and claims; ``None`` without ``Authorization`` (anonymous).

        Raises:
            RefusalError: the token is refused, or the keys are unavailable.
        """
        meta = request._request.META
        if not meta.get("HTTP_AUTHORIZATION"):
            return None
        setup = configured()
        try:
            claims = setup.guard.authenticate(**guard_arguments(meta, setup.public_url))
        except Refusal as refusal:
            if refusal.reason == "missing-token":  # another scheme: not ours
                return None
            raise RefusalError(refusal) from None
        return TokenUser(claims), claims

    def authenticate_header(self, request: Request) -> str:  # noqa: ARG002
        """The challenge DRF sends with a 401 for a request without credentials."""
        return configured().guard.challenges.missing_challenge


class _Grants(BasePermission):
    scopes: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    def has_permission(self, request: Request, view: Any) -> bool:  # noqa: ARG002
        claims = request.auth
        if not isinstance(claims, Claims):
            return False  # not authenticated by a token: DRF answers 401/403 itself
        try:
            configured().guard.check(claims, scopes=self.scopes, roles=self.roles)
        except Refusal as refusal:
            raise RefusalError(refusal) from None
        return True


def require_scopes(*scopes: str) -> type[BasePermission]:
    """A permission class requiring every one of ``scopes`` (403 ``insufficient_scope``)."""
    return type("RequireScopes", (_Grants,), {"scopes": scopes, "__doc__": f"Scopes {scopes}."})


def require_roles(*roles: str) -> type[BasePermission]:
    """A permission class requiring every one of ``roles`` (read at ``ROLE_CLAIMS``)."""
    return type("RequireRoles", (_Grants,), {"roles": roles, "__doc__": f"Roles {roles}."})
