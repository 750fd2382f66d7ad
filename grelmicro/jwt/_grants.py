"""What a verified token grants: scopes and roles, read one way everywhere.

The one home of these rules: :class:`~grelmicro.jwt.Claims` (``scopes``,
``has_scopes``, ``roles``, ``has_roles``) and the FastAPI dependency
(``Security(auth, scopes=[...])``, ``auth.require_roles(...)``) both read
through the functions below, so a route never grants what ``Claims`` refuses.

Scopes (RFC 6749 §3.3)
    ``scope`` (RFC 8693, a string) or, when it is absent, ``scp`` (a string
    or an array, as Entra and Okta send it). A string is split on U+0020
    only; an item outside the scope-token grammar (printable ASCII except
    ``"`` and the backslash) is not a scope. ``scope`` wins over ``scp``: a token
    carrying both is read from ``scope`` alone, never from their union.
    Auth0's ``permissions`` (an array) counts only when asked for, read with
    the same rules.

Roles
    Read from configured claim paths: ``roles`` (Entra app roles),
    ``realm_access.roles`` and ``resource_access.<client>.roles`` (Keycloak),
    ``permissions`` (Auth0), ``cognito:groups`` or ``groups``. A path is a
    sequence of claim names; a string is split on its dots
    (``"realm_access.roles"``), except a string containing ``://``, which is
    one claim name: Auth0's namespaced claims are URLs
    (``"https://example.com/roles"``), dots included, and split they would
    silently match nothing. A name with a dot in it (a client id, or a path
    into a URL-named claim) is given as a sequence:
    ``("resource_access", "my.api", "roles")``. The value at a path is an
    array of strings (non-strings and empty strings are skipped) or one
    string taken as one role; anything else grants nothing.

Checks
    :func:`require_scopes`, :func:`require_roles` and :func:`require_tenant`
    (public as ``grelmicro.jwt.require_*``) raise the taxonomy's 403 errors
    (:class:`~grelmicro.jwt.InsufficientScopeError`,
    :class:`~grelmicro.jwt.InsufficientRoleError`,
    :class:`~grelmicro.jwt.AccessDeniedError` with ``missing == ("tenant",)``);
    :meth:`grelmicro.jwt.challenges.Challenges.answer` turns each into its
    HTTP answer. Every integration checks through them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from grelmicro.jwt.errors import (
    AccessDeniedError,
    ConfigurationError,
    InsufficientRoleError,
    InsufficientScopeError,
)

__all__ = [
    "DEFAULT_ROLE_PATHS",
    "RolePath",
    "granted_scopes",
    "missing",
    "require_roles",
    "require_scopes",
    "require_tenant",
    "role_paths",
    "roles_at",
    "scope_tokens",
]

#: RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")

#: A claim path, split into names: ``("realm_access", "roles")``.
RolePath = tuple[str, ...]

#: Where roles are read when no path is configured: the ``roles`` claim.
DEFAULT_ROLE_PATHS: tuple[RolePath, ...] = (("roles",),)


def _tokens(items: Iterable[Any]) -> frozenset[str]:
    """The items that are scope tokens by RFC 6749 §3.3; anything else is not a scope."""
    return frozenset(
        item for item in items if isinstance(item, str) and _SCOPE_TOKEN.fullmatch(item)
    )


def scope_tokens(value: object) -> frozenset[str]:
    """The scopes one claim's value grants: a space-separated string or an array."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            # The usual case, checked in C: printable ASCII holds no whitespace
            # but U+0020, so split() splits on spaces only and every item is a token.
            return frozenset(value.split())
        return _tokens(value.split(" "))
    if isinstance(value, (tuple, list)):
        return _tokens(value)
    return frozenset()


def granted_scopes(claims: Mapping[str, Any], *, permissions: bool = False) -> frozenset[str]:
    """The scopes ``claims`` grant: ``scope``, else ``scp``; plus ``permissions`` if asked."""
    raw = claims.get("scope")
    if raw is None:
        raw = claims.get("scp")
    granted = scope_tokens(raw)
    if permissions:
        extra = claims.get("permissions")
        if extra is not None:
            granted |= scope_tokens(extra)
    return granted


def _names(path: str) -> RolePath:
    """A path given as a string: split on dots, unless it is a URL (one claim name)."""
    return (path,) if "://" in path else tuple(path.split("."))


def role_paths(paths: str | Sequence[str | Sequence[str]] | None) -> tuple[RolePath, ...]:
    """Configured claim paths, checked once: ``"realm_access.roles"`` or ``("a", "b.c")``.

    A string containing ``://`` is one claim name (``"https://example.com/roles"``).

    Raises:
        ConfigurationError: a path is empty or not made of non-empty names.
    """
    if paths is None:
        return DEFAULT_ROLE_PATHS
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, Sequence):
        raise ConfigurationError("role claim paths are a string or a list of them")
    result: list[RolePath] = []
    for path in paths:
        names = _names(path) if isinstance(path, str) else path
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise ConfigurationError(
                "a role claim path is a dotted string such as 'realm_access.roles' "
                "or a sequence of claim names"
            )
        parts = tuple(names)
        if not parts or not all(isinstance(name, str) and name for name in parts):
            raise ConfigurationError(
                "a role claim path needs non-empty claim names, such as 'realm_access.roles'"
            )
        result.append(parts)
    if not result:
        raise ConfigurationError("give at least one role claim path, such as 'roles'")
    return tuple(result)


def _at(claims: Mapping[str, Any], path: RolePath) -> object:
    value: object = claims
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def roles_at(claims: Mapping[str, Any], paths: Sequence[RolePath]) -> frozenset[str]:
    """The roles found at ``paths`` (as :func:`role_paths` returns them), together."""
    roles: set[str] = set()
    for path in paths:
        value = _at(claims, path)
        if isinstance(value, str):
            if value:
                roles.add(value)
        elif isinstance(value, (tuple, list)):
            roles.update(item for item in value if isinstance(item, str) and item)
    return frozenset(roles)


def missing(granted: frozenset[str], required: Iterable[str]) -> list[str]:
    """The required items ``granted`` lacks, in the order they were required."""
    return [item for item in required if item not in granted]


def _names_of(items: str | Iterable[str], what: str) -> tuple[str, ...]:
    """Required names, checked: one string or an iterable of non-empty strings."""
    names = (items,) if isinstance(items, str) else tuple(items)
    if not all(isinstance(name, str) and name for name in names):
        raise ConfigurationError(f"{what} are non-empty strings")
    return names


def require_scopes(
    claims: Mapping[str, Any], scopes: str | Iterable[str], *, permissions: bool = False
) -> None:
    """Refuse ``claims`` unless they grant every scope in ``scopes``.

    Scopes are read as :attr:`Claims.scopes <grelmicro.jwt.Claims.scopes>`
    reads them (``scope``, else ``scp``); ``permissions=True`` also counts
    Auth0's ``permissions`` array.

    Raises:
        InsufficientScopeError: a scope is missing; ``missing`` lists those
            not granted, ``required`` all of ``scopes`` (HTTP 403
            ``insufficient_scope``).
        ConfigurationError: a scope is not a non-empty string.
    """
    wanted = _names_of(scopes, "scopes")
    granted = granted_scopes(claims, permissions=permissions)
    if not granted.issuperset(wanted):
        error = InsufficientScopeError(f"missing scopes: {' '.join(missing(granted, wanted))}")
        error.missing = tuple(missing(granted, wanted))
        error.required = wanted
        raise error


def require_roles(
    claims: Mapping[str, Any],
    roles: str | Iterable[str],
    *,
    role_claims: str | Sequence[str | Sequence[str]] | None = None,
) -> None:
    """Refuse ``claims`` unless every role in ``roles`` is found at ``role_claims``.

    ``role_claims``: the claim paths roles are read from (default ``roles``;
    ``"realm_access.roles"`` for Keycloak; see :func:`role_paths`).

    Raises:
        InsufficientRoleError: a role is missing (HTTP 403); ``missing``
            lists the roles not found, ``required`` all of ``roles``.
        ConfigurationError: a role or a path is malformed.
    """
    wanted = _names_of(roles, "roles")
    found = roles_at(claims, role_paths(role_claims))
    if not found.issuperset(wanted):
        lacking = tuple(missing(found, wanted))
        error = InsufficientRoleError(f"missing roles: {', '.join(lacking)}")
        error.missing = lacking
        error.required = wanted
        raise error


def require_tenant(
    claims: Mapping[str, Any], tenants: str | Iterable[str], *, claim: str | None = None
) -> None:
    """Refuse ``claims`` unless their tenant is in ``tenants``.

    The tenant of a :class:`~grelmicro.jwt.Claims` is
    :attr:`Claims.tenant <grelmicro.jwt.Claims.tenant>` by default: read
    only from an issuer template's token, from its tenant claim (another
    issuer's ``tid`` is no tenant); of a plain mapping, its ``tid``.
    ``claim=`` reads that claim from any token instead: only where every
    issuer is trusted to set it.

    Raises:
        AccessDeniedError: another tenant, or none (HTTP 403, reason
            ``access-denied``, ``missing == ("tenant",)``); the message never
            shows the token's tenant.
        ConfigurationError: a tenant or ``claim`` is not a non-empty string.
    """
    allowed = _names_of(tenants, "tenants")
    if claim is not None and (not isinstance(claim, str) or not claim):
        raise ConfigurationError("the tenant claim is a claim name, such as 'tid'")
    if claim is not None:
        tenant = claims.get(claim)
    elif isinstance(getattr(type(claims), "tenant", None), property):  # Claims (no import circle)
        tenant = getattr(claims, "tenant", None)  # a template issuer's tenant claim only
    else:
        tenant = claims.get("tid")  # a plain mapping: no issuer to tell, its tid
    if not isinstance(tenant, str) or tenant not in allowed:
        error = AccessDeniedError("the token's tenant is not allowed here")
        error.missing = ("tenant",)
        error.required = ("tenant",)
        raise error
