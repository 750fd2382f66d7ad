"""Issuers: who is trusted, with which keys and which policy, and building the router.

:class:`Issuer` declares one trusted issuer (its key source and its own
policy on top of the verifier's); :func:`build_router` turns the verifier's
configuration into the :class:`~grelmicro.jwt._router.KeyRouter` (one slot
per issuer, one :class:`~grelmicro.jwt._jwks.KeySource` per distinct JWKS
URL or discovered issuer). Routing and the network miss path live in
:mod:`grelmicro.jwt._router`.
"""

from __future__ import annotations

import difflib
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

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
from grelmicro.jwt._events import log_event
from grelmicro.jwt._http import Clients, FetchOptions, check_url
from grelmicro.jwt._jwks import KeySource
from grelmicro.jwt._keys import Key, json_text
from grelmicro.jwt._router import KeyRouter, Precheck, Slot, TemplateRoute, static_slot
from grelmicro.jwt._tenants import (
    PLACEHOLDER,
    TENANT_TTL,
    IssuerTemplate,
    TenantRoute,
    Tenants,
    TenantsOption,
    check_unambiguous,
    is_template,
)
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["Issuer", "build_router", "lift_template", "network_algorithms"]

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

    The policy keywords are :class:`~grelmicro.jwt.IssuerSettings`: every
    :class:`~grelmicro.jwt.JWTConfig` setting that checks the token
    (``audience``, ``azp``, ``algorithms``, ``leeway``, ``require_exp``,
    ``required``, ``typ``, ``max_age``); the verifier-wide ones (``issuer``,
    the size limits, the cache) are refused here. Settings left ``None``
    take the verifier's; ``required`` adds to the verifier's claims.

    A setting that would loosen the verifier's policy for this issuer (fewer
    required claims, ``require_exp=False``, another ``typ``, a longer
    ``max_age``, a larger ``leeway``, an empty ``audience`` or ``azp``) is
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
        "discover",
        "discovery_url",
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
        **policy: Unpack[IssuerSettings],
    ) -> None:
        if not isinstance(issuer, str) or not issuer:
            raise ConfigurationError("an issuer is a non-empty string")
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
        if template is None and discover != issuer:
            raise ConfigurationError(
                f"issuer {issuer!r}: discover=True reads the issuer's own metadata; a "
                "discovery URL is given only for an issuer template"
            )
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


def _static_key_set(
    issuer: str,
    keys: Sequence[Key] | None,
    jwks: Mapping[str, Any] | str | bytes | None,
    allow_symmetric: bool,
) -> _core.KeySet:
    try:
        if keys is not None:
            for key in keys:
                if not isinstance(key, Key):
                    raise ConfigurationError(f"issuer {issuer!r}: keys must be Key objects")
            return _core.KeySet([key._inner for key in keys])
        return _core.KeySet.from_jwks(json_text(jwks, "JWKS"), allow_symmetric=allow_symmetric)
    except _core.CoreError as exc:
        _core.raise_translated(exc)


def _static_slot(issuer: Issuer, policy: _core.Policy) -> tuple[Slot, int]:
    key_set = _static_key_set(issuer.issuer, issuer.keys, issuer.jwks, issuer.allow_symmetric)
    return static_slot(issuer.issuer, policy, key_set), len(key_set)


def _issuer_config(base: JWTConfig, issuer: Issuer) -> JWTConfig:
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


def _check_sources(
    config: JWTConfig,
    jwks_url: str | None,
    discover: str | None,
    issuers: Sequence[Issuer] | Issuer | None,
    allow_insecure_loopback: bool,
) -> tuple[JWTConfig, list[Issuer] | None]:
    """Refuse conflicting key sources; the discovered issuer becomes the policy's."""
    if issuers is not None:
        if jwks_url is not None or discover is not None:
            raise ConfigurationError("with issuers=[...], give each issuer its own keys")
        if config.issuer:
            raise ConfigurationError("with issuers=[...], do not also pass issuer=")
        if isinstance(issuers, Issuer):
            issuers = [issuers]
        listed = list(issuers)
        if not listed or not all(isinstance(i, Issuer) for i in listed):
            raise ConfigurationError("issuers must be a non-empty list of Issuer objects")
        return config, listed
    if discover is not None:
        if not isinstance(discover, str):
            raise ConfigurationError("discover must be the issuer URL")
        if config.issuer and config.issuer != (discover,):
            raise ConfigurationError(
                "discover= names the issuer; issuer= must be absent or the same string"
            )
        check_url(discover, "discover", allow_insecure_loopback=allow_insecure_loopback)
        return config.model_copy(update={"issuer": (discover,)}), None
    check_url(jwks_url, "jwks_url", allow_insecure_loopback=allow_insecure_loopback)
    if not config.issuer:
        # Kept working for existing users, but said once, when it is built:
        # whoever can get a token signed by these keys picks its iss.
        logger.warning(
            "jwks_url %s without issuer=: the token's iss is not checked; pass issuer= "
            "(or discover= the issuer) so that only tokens of that issuer are accepted",
            jwks_url,
        )
    return config, None


#: Key sources built for one JWKS URL (or discovered issuer) in this process
#: before a warning says to share one verifier instead (once per URL).
MANY_SOURCES = 8
_built: dict[str, int] = {}
_built_lock = threading.Lock()


def _count_built(name: str) -> None:
    """Count a key source built for ``name``; warn once when they are many.

    A verifier built per request (or per call) fetches the keys each time
    and keeps no cache: the classic mistake this catches.
    """
    with _built_lock:
        count = _built[name] = _built.get(name, 0) + 1
    if count == MANY_SOURCES:
        log_event(
            logging.WARNING,
            "verifier.many_per_source",
            name,
            "%d verifiers were built for %s in this process: build one at startup and share "
            "it (each verifier fetches and caches its own keys)",
            count,
            name,
            verifiers=count,
        )


def build_router(
    config: JWTConfig,
    *,
    jwks_url: str | None,
    discover: str | None,
    issuers: Sequence[Issuer] | None,
    client: object,
    fetch: FetchOptions | None,
    allow_insecure_loopback: bool,
    clock: Callable[[], float] = time.time,
) -> tuple[KeyRouter, JWTConfig]:
    """The router for network keys or several issuers, and the verifier's config."""
    if fetch is None:
        fetch = FetchOptions()
    elif not isinstance(fetch, FetchOptions):
        raise ConfigurationError("fetch must be a FetchOptions")
    config, listed = _check_sources(config, jwks_url, discover, issuers, allow_insecure_loopback)
    clients = Clients(client, fetch)
    sources: dict[str, KeySource] = {}

    def source(
        url: str | None, discovered: str | None, insecure: bool, expect: str | None = None
    ) -> KeySource:
        name = url if url is not None else f"discover:{discovered} issuer:{expect}"
        found = sources.get(name)
        if found is None:
            _count_built(url if url is not None else str(discovered))
            found = sources[name] = KeySource(
                jwks_url=url,
                discover=discovered,
                issuer=expect,
                options=fetch,
                clients=clients,
                allow_insecure_loopback=insecure,
                timer=fetch.timer or time.monotonic,
                wall=clock,
            )
        return found

    slots: dict[str, Slot] = {}
    templates: list[TemplateRoute] = []
    static_keys = 0
    if listed is None:
        slot = Slot(
            config.issuer[0] if len(config.issuer) == 1 else "(any configured issuer)",
            config.policy(),
            source(jwks_url, discover, allow_insecure_loopback),
            refetch_algorithms=network_algorithms(config),
            max_token_size=config.max_token_size,
            precheck=_precheck(config),
        )
        slots[slot.name] = slot
    else:
        names = [issuer.issuer for issuer in listed]
        check_unambiguous(names)
        for issuer in listed:
            if names.count(issuer.issuer) > 1:
                raise ConfigurationError(f"issuer {issuer.issuer!r} is configured twice")
            own = _issuer_config(config, issuer)
            policy = own.policy()
            if issuer.jwks_url is not None or issuer.discover:
                slot = Slot(
                    issuer.issuer,
                    policy,
                    source(
                        issuer.jwks_url,
                        issuer.discovery_url,
                        issuer.allow_insecure_loopback,
                        issuer.issuer if issuer.template is not None else None,
                    ),
                    refetch_algorithms=network_algorithms(own),
                    max_token_size=own.max_token_size,
                    precheck=_precheck(own),
                )
            else:
                slot, count = _static_slot(issuer, policy)
                static_keys += count
            if issuer.template is None:
                slots[issuer.issuer] = slot
                continue
            assert issuer.tenants is not None  # noqa: S101 - required with a template
            templates.append(
                TenantRoute(
                    issuer.template, slot, issuer.tenants, issuer.tenant_claim, own.max_token_size
                )
            )
    router = KeyRouter(
        slots,
        list(sources.values()),
        clients,
        config.max_token_size,
        static_keys,
        templates=tuple(templates),
    )
    return router, config


def lift_template(
    config: JWTConfig,
    *,
    keys: Sequence[Key] | None,
    jwks: Mapping[str, Any] | str | bytes | None,
    jwks_url: str | None,
    discover: str | None,
    tenants: TenantsOption | None,
    tenant_claim: str,
    tenants_ttl: float,
    several: bool,
    allow_symmetric: bool,
    allow_insecure_loopback: bool,
) -> tuple[JWTConfig, Issuer | None]:
    """``JWTVerifier(issuer="...{tenantid}...", ...)`` as the one ``Issuer`` it means.

    The verifier's key source (``keys``, ``jwks``, ``jwks_url`` or
    ``discover=`` the URL whose metadata names the template) and
    ``tenants`` become the template issuer's; the verifier's policy stays
    its own (the issuer inherits it). ``several``: ``issuers=`` was given too.
    """
    if isinstance(discover, str) and is_template(discover):
        raise ConfigurationError(
            "discover= is the URL of the metadata (such as "
            "https://login.microsoftonline.com/common/v2.0); the template it names goes "
            "in issuer=, with tenants="
        )
    templates = [name for name in config.issuer if is_template(name)]
    if not templates:
        if tenants is not None:
            raise ConfigurationError(
                f"tenants= applies to an issuer template: pass issuer= with {PLACEHOLDER} in "
                "place of the tenant (https://login.microsoftonline.com/{tenantid}/v2.0)"
            )
        return config, None
    if several:
        raise ConfigurationError("with issuers=[...], do not also pass issuer=")
    if len(config.issuer) > 1:
        raise ConfigurationError(
            "an issuer template is given alone in issuer=; for several issuers pass "
            "issuers=[Issuer(...), ...]"
        )
    issuer = Issuer(
        templates[0],
        keys=keys,
        jwks=jwks,
        jwks_url=jwks_url,
        discover=discover if discover is not None else False,
        allow_symmetric=allow_symmetric,
        allow_insecure_loopback=allow_insecure_loopback,
        tenants=tenants,
        tenant_claim=tenant_claim,
        tenants_ttl=tenants_ttl,
    )
    return config.model_copy(update={"issuer": ()}), issuer


def _precheck(config: JWTConfig) -> Precheck:
    """What a token must pass, unverified, before it spends a key fetch."""
    return Precheck(
        issuers=tuple(config.issuer),
        audiences=tuple(config.audience),
        leeway=float(config.leeway),
        max_token_size=config.max_token_size,
    )
