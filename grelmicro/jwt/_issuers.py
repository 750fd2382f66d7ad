"""Issuers: who is trusted, with which keys, and with which policy.

:class:`Issuer` declares one trusted issuer (its key source and its own
policy on top of the verifier's); :func:`issuer_config` merges the two and
refuses what would check an issuer's tokens less than the verifier's policy.
Building the router from them is :mod:`grelmicro.jwt._build`'s; routing and
the network miss path are :mod:`grelmicro.jwt._router`'s.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from typing_extensions import Unpack

from grelmicro.jwt import _core
from grelmicro.jwt._config import (
    ISSUER_SETTINGS,
    SCOPES,
    IssuerSettings,
    JWTConfig,
    as_names,
    check_flags,
)
from grelmicro.jwt._http import check_url
from grelmicro.jwt._keys import Key
from grelmicro.jwt._tenants import (
    PLACEHOLDER,
    TENANT_TTL,
    IssuerTemplate,
    Tenants,
    TenantsOption,
    is_template,
)
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["Issuer", "issuer_config", "network_algorithms"]

logger = logging.getLogger("grelmicro.jwt")


def network_algorithms(config: JWTConfig) -> frozenset[str]:
    """Algorithms a fetched key could bring: the policy's, public-key ones only."""
    names = config.algorithms if config.algorithms is not None else _core.algorithms()
    return frozenset(name for name in names if not name.startswith("HS"))


class Issuer:
    """One trusted issuer: where its keys come from, and its own policy.

    Exactly one key source: ``keys``, ``jwks``, ``jwks_url`` or
    ``discover=True`` (OpenID Connect discovery at the issuer's URL).

    A multi-tenant issuer is a *template* with one ``{tenantid}`` path
    segment (``https://login.microsoftonline.com/{tenantid}/v2.0``): a
    token matches it only when that segment equals its tenant claim
    (``tenant_claim``, ``tid`` by default) and is a tenant ``tenants``
    allows: a list of ids, a callable ``tenant -> bool`` (sync or async;
    answers kept ``tenants_ttl`` seconds) or ``"any"``. ``tenants`` is
    required with a template and refused without one. A template has no
    URL of its own: ``discover=`` then takes the URL whose metadata names
    the template (``https://login.microsoftonline.com/common/v2.0``). One
    key source verifies every tenant's tokens (one JWKS, fetched once).
    ``discover=`` also takes a URL for an exact issuer whose metadata lives
    elsewhere (Azure AD B2C's policy metadata): the document must still name
    ``issuer``, character for character.

    ``guests="refuse"`` refuses a guest's token (Entra ID: ``acct`` is 1, or
    ``idp`` differs from ``iss``) with :class:`~grelmicro.jwt.GuestRejectedError`
    (HTTP 403). ``claim_values`` maps claim names to the string (or the
    strings) a verified token's claim must equal: ``{"token_use": "access"}``
    for Amazon Cognito, ``{"repository": "octo/app"}`` for GitHub Actions;
    anything else is :class:`~grelmicro.jwt.InvalidClaimError`.

    The policy keywords are :class:`~grelmicro.jwt.IssuerSettings`: every
    :class:`~grelmicro.jwt.JWTConfig` setting that checks the token
    (``audience``, ``azp``, ``algorithms``, ``leeway``, ``leeway_ahead``, ``require_exp``,
    ``required``, ``typ``, ``max_age``); the verifier-wide ones (``issuer``,
    the size limits, the cache) are refused here. Settings left ``None``
    take the verifier's; ``required`` adds to the verifier's claims.

    A setting that would loosen the verifier's policy for this issuer (fewer
    required claims, ``require_exp=False``, another ``typ``, a longer
    ``max_age``, a larger ``leeway`` or ``leeway_ahead``, an empty
    ``audience`` or ``azp``) is
    refused when the verifier is built unless ``allow_weaker`` names it; a
    named ``required`` then replaces the verifier's claims instead of adding
    to them.

    Example:
        >>> Issuer(
        ...     "https://tenant-a.example.com/",
        ...     jwks_url="https://tenant-a.example.com/jwks.json",
        ...     audience="api://orders",
        ... )  # doctest: +SKIP
    """

    __slots__ = (
        "allow_insecure_loopback",
        "allow_symmetric",
        "allow_weaker",
        "claim_values",
        "discover",
        "discovery_url",
        "guests",
        "issuer",
        "jwks",
        "jwks_url",
        "keys",
        "policy",
        "template",
        "tenant_claim",
        "tenants",
    )

    issuer: str
    keys: tuple[Key, ...] | None
    jwks: Mapping[str, Any] | str | bytes | None
    jwks_url: str | None
    discover: bool
    discovery_url: str | None
    template: IssuerTemplate | None
    tenants: Tenants | None
    tenant_claim: str
    allow_symmetric: bool
    allow_insecure_loopback: bool
    allow_weaker: frozenset[str]
    guests: Literal["allow", "refuse"]
    claim_values: Mapping[str, frozenset[str]]
    policy: dict[str, object]

    def __init__(
        self,
        issuer: str,
        *,
        keys: Sequence[Key] | Key | None = None,
        jwks: Mapping[str, Any] | str | bytes | None = None,
        jwks_url: str | None = None,
        discover: bool | str = False,
        allow_symmetric: bool = False,
        allow_insecure_loopback: bool = False,
        allow_weaker: Collection[str] = (),
        tenants: TenantsOption | None = None,
        tenant_claim: str = "tid",
        tenants_ttl: float = TENANT_TTL,
        guests: Literal["allow", "refuse"] = "allow",
        claim_values: Mapping[str, str | Collection[str]] | None = None,
        **policy: Unpack[IssuerSettings],
    ) -> None:
        if not isinstance(issuer, str) or not issuer:
            raise ConfigurationError("an issuer is a non-empty string")
        if guests not in ("allow", "refuse"):
            raise ConfigurationError(f'issuer {issuer!r}: guests= is "allow" or "refuse"')
        values_checked = _claim_values(issuer, claim_values)
        template = IssuerTemplate(issuer) if is_template(issuer) else None
        discovery_url = _discovery_url(issuer, template, discover, allow_insecure_loopback)
        discover = discovery_url is not None
        check_flags(
            discover=discover,
            allow_symmetric=allow_symmetric,
            allow_insecure_loopback=allow_insecure_loopback,
        )
        if template is None and tenants is not None:
            raise ConfigurationError(
                f"issuer {issuer!r}: tenants= applies to an issuer template, one whose tenant "
                f"segment is {PLACEHOLDER}"
            )
        if not isinstance(tenant_claim, str) or not tenant_claim:
            raise ConfigurationError(f"issuer {issuer!r}: tenant_claim is a claim name")
        where = f"issuer {issuer!r}"
        allowed = None if template is None else Tenants(where, tenants, ttl=tenants_ttl)
        given = [
            name
            for name, value in (
                ("keys", keys),
                ("jwks", jwks),
                ("jwks_url", jwks_url),
                ("discover", discover or None),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise ConfigurationError(
                f"issuer {issuer!r}: give exactly one of keys, jwks, jwks_url or discover=True"
            )
        if jwks_url is not None:
            check_url(jwks_url, "jwks_url", allow_insecure_loopback=allow_insecure_loopback)
        for name in policy:
            if name not in ISSUER_SETTINGS:
                raise ConfigurationError(_not_per_issuer(issuer, name))
        values = {
            "allow_weaker": _setting_names(issuer, allow_weaker),
            "issuer": issuer,
            "keys": (keys,) if isinstance(keys, Key) else None if keys is None else tuple(keys),
            "jwks": jwks,
            "jwks_url": jwks_url,
            "discover": discover,
            "discovery_url": discovery_url,
            "template": template,
            "tenants": allowed,
            "tenant_claim": tenant_claim,
            "guests": guests,
            "claim_values": values_checked,
            "allow_symmetric": allow_symmetric,
            "allow_insecure_loopback": allow_insecure_loopback,
            "policy": {k: v for k, v in policy.items() if v is not None},
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Issuer is immutable")

    def __repr__(self) -> str:
        source = (
            (
                "discover=True"
                if self.discovery_url == self.issuer
                else f"discover={self.discovery_url!r}"
            )
            if self.discover
            else f"jwks_url={self.jwks_url!r}"
            if self.jwks_url
            else "static keys"
        )
        return f"Issuer({self.issuer!r}, {source})"


def _discovery_url(
    issuer: str, template: IssuerTemplate | None, discover: object, allow_insecure_loopback: bool
) -> str | None:
    """Where an issuer's metadata is read: its own URL, or a template's ``discover=`` URL."""
    if discover is False:
        return None
    if isinstance(discover, str):
        if not discover:
            raise ConfigurationError(f"issuer {issuer!r}: discover= is a URL or True")
        return check_url(discover, "discover", allow_insecure_loopback=allow_insecure_loopback)
    if discover is not True:
        check_flags(discover=discover)  # says what it takes
    if template is not None:
        raise ConfigurationError(
            f"issuer {issuer!r}: a template has no URL of its own; pass discover= the URL whose "
            "metadata names it, such as https://login.microsoftonline.com/common/v2.0 "
            "(or organizations)"
        )
    return check_url(issuer, "discover", allow_insecure_loopback=allow_insecure_loopback)


def _claim_values(issuer: str, given: object) -> dict[str, frozenset[str]]:
    """``claim_values``: claim name -> the non-empty strings it may equal."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigurationError(f"issuer {issuer!r}: claim_values maps claim names to strings")
    checked: dict[str, frozenset[str]] = {}
    for name, value in given.items():
        values = (value,) if isinstance(value, str) else value
        if (
            not isinstance(name, str)
            or not name
            or not isinstance(values, Collection)
            or not values
            or not all(isinstance(item, str) and item for item in values)
        ):
            raise ConfigurationError(
                f"issuer {issuer!r}: claim_values maps a claim name to a string or a list of "
                "non-empty strings"
            )
        checked[name] = frozenset(values)
    return checked


def issuer_config(base: JWTConfig, issuer: Issuer) -> JWTConfig:
    """The verifier's policy with the issuer's settings on top.

    The issuer's ``required`` adds to the verifier's (``exp`` stays
    ``require_exp``'s); any setting that leaves the issuer's tokens checked
    less than the verifier's is refused unless ``allow_weaker`` names it.
    """
    own = issuer.policy
    relaxed = issuer.allow_weaker
    values = base.model_dump(exclude_none=True)
    values.update(own)
    # A template's iss is checked by its route (template, tenant claim,
    # tenants), never by the core's exact match.
    values["issuer"] = () if issuer.template is not None else (issuer.issuer,)
    inherited = base.required
    if own.get("require_exp") is False:
        inherited = tuple(name for name in inherited if name != "exp")
    added = as_names(own.get("required", ()))
    if "required" in relaxed and "required" in own:
        values["required"] = added
    elif isinstance(added, tuple):
        values["required"] = (*inherited, *(name for name in added if name not in inherited))
    config = JWTConfig.build(**values)
    weaker = [name for name in _loosened(base, config) if name not in relaxed]
    if weaker:
        raise ConfigurationError(
            f"issuer {issuer.issuer!r}: {', '.join(weaker)} would check this issuer's tokens "
            "less than the verifier's policy; pass allow_weaker=["
            + ", ".join(repr(name) for name in weaker)
            + "] to the Issuer if that is meant"
        )
    return config


def _loosened(base: JWTConfig, config: JWTConfig) -> list[str]:
    """The settings in which ``config`` checks less than ``base``."""
    checks = {
        # exp is require_exp's to drop, not required's.
        "required": not set(base.required) - {"exp"} <= set(config.required),
        "require_exp": base.require_exp and not config.require_exp,
        "typ": base.typ is not None and config.typ != base.typ,
        "max_age": base.max_age is not None
        and (config.max_age is None or config.max_age > base.max_age),
        "leeway": config.leeway > base.leeway,
        "leeway_ahead": config.leeway_ahead > base.leeway_ahead,
        "audience": bool(base.audience) and not config.audience,
        "azp": bool(base.azp) and not config.azp,
    }
    return [name for name, weaker in checks.items() if weaker]


def _setting_names(issuer: str, names: object) -> frozenset[str]:
    """``allow_weaker``: names of per-issuer settings (a near miss is named)."""
    listed = as_names(names)
    if not isinstance(listed, tuple) or not all(isinstance(name, str) for name in listed):
        raise ConfigurationError(f"issuer {issuer!r}: allow_weaker must be a list of setting names")
    for name in listed:
        if name not in ISSUER_SETTINGS:
            raise ConfigurationError(
                f"issuer {issuer!r}: allow_weaker names {name!r}, not a per-issuer setting"
                + _closest(name)
            )
    return frozenset(listed)


def _not_per_issuer(issuer: str, name: str) -> str:
    """Why the keyword ``name`` is no per-issuer setting, with the closest one that is."""
    if name in SCOPES:  # a JWTConfig field of the whole verifier
        return (
            f"issuer {issuer!r}: {name} applies to the whole verifier; "
            "pass it to JWTVerifier, not to an Issuer"
        )
    return f"issuer {issuer!r}: {name!r} is not a per-issuer setting" + _closest(name)


def _closest(name: str) -> str:
    close = difflib.get_close_matches(name, ISSUER_SETTINGS, n=1)
    return f"; did you mean {close[0]}?" if close else ""
