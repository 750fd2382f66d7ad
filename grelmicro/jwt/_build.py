"""Building the key router from a verifier's configuration.

:func:`build_router` turns ``jwks_url=``, ``discover=`` or ``issuers=[...]``
(and issuer templates, :func:`lift_template`) into a
:class:`~grelmicro.jwt._router.KeyRouter`: one slot per issuer, one
:class:`~grelmicro.jwt._jwks.KeySource` per distinct JWKS URL or discovered
issuer, shared by the slots that name it. Who an issuer is and its policy are
:mod:`grelmicro.jwt._issuers`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._claims import register_template
from grelmicro.jwt._config import JWTConfig
from grelmicro.jwt._events import Observers, log_event
from grelmicro.jwt._fetch import Fetcher
from grelmicro.jwt._http import Clients, FetchOptions, check_url
from grelmicro.jwt._issuers import Issuer, issuer_config, network_algorithms
from grelmicro.jwt._jwks import KeySource
from grelmicro.jwt._keys import Key, json_text
from grelmicro.jwt._router import KeyRouter, Precheck, Slot, TemplateRoute, static_slot
from grelmicro.jwt._tenants import (
    PLACEHOLDER,
    ExactIssuer,
    TenantRoute,
    TenantsOption,
    check_unambiguous,
    is_template,
)
from grelmicro.jwt.errors import ConfigurationError, WeakKeyError

__all__ = ["MANY_SOURCES", "build_router", "lift_template"]

logger = logging.getLogger("grelmicro.jwt")


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


def _static_slot(issuer: Issuer, policy: _core.Policy) -> tuple[Slot, int, list[_core.Key]]:
    key_set = _static_key_set(issuer.issuer, issuer.keys, issuer.jwks, issuer.allow_symmetric)
    return static_slot(issuer.issuer, policy, key_set), len(key_set), key_set.keys


#: The core's code for a secret whose reading is a public member or a kid of
#: a key beside it (issues 33 and 38, D5).
_EXPOSED = "exposed-secret"


def check_no_exposed_secret(keys: list[_core.Key]) -> None:
    """Refuse an HMAC secret that is public material of any key of the verifier.

    Each issuer's key set checks its own keys; this checks them all together,
    across issuers (issue 38, D5): a secret of one issuer that reads as a
    member or a kid of another issuer's key is as public as that key.
    """
    if len(keys) < 2:
        return
    try:
        together = _core.KeySet(keys)
    except _core.CoreError:
        return  # no usable key in all: each issuer's own set said why
    for kid, code, reason in together.skipped:
        if code == _EXPOSED:
            raise WeakKeyError(f"key {kid!r}: {reason}")


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

_lifecycle.renew_lock_after_fork(globals(), "_built_lock")  # a child's copy may be held


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
            observers = Observers()
            fetcher = Fetcher(
                jwks_url=url,
                discover=discovered,
                issuer=expect,
                options=fetch,
                clients=clients,
                allow_insecure_loopback=insecure,
                emit=observers.emit,
            )
            found = sources[name] = KeySource(
                fetcher, observers, timer=fetch.timer or time.monotonic, wall=clock
            )
        return found

    slots: dict[str, Slot] = {}
    templates: list[TemplateRoute] = []
    static_keys = 0
    in_code: list[_core.Key] = []
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
            own = issuer_config(config, issuer)
            policy = own.policy()
            if issuer.jwks_url is not None or issuer.discover:
                slot = Slot(
                    issuer.issuer,
                    policy,
                    source(
                        issuer.jwks_url,
                        issuer.discovery_url,
                        issuer.allow_insecure_loopback,
                        # A template, or metadata elsewhere (B2C): the document names it.
                        issuer.issuer if issuer.discovery_url != issuer.issuer else None,
                    ),
                    refetch_algorithms=network_algorithms(own),
                    max_token_size=own.max_token_size,
                    precheck=_precheck(own),
                )
            else:
                slot, count, held = _static_slot(issuer, policy)
                static_keys += count
                in_code.extend(held)
            checks = {"guests": issuer.guests, "values": issuer.claim_values}
            if issuer.template is None:
                if issuer.guests == "allow" and not issuer.claim_values:
                    slots[issuer.issuer] = slot
                    continue
                # Checks after the signature: routed like a template, matched exactly.
                templates.append(
                    TenantRoute(
                        ExactIssuer(issuer.issuer),
                        slot,
                        None,
                        issuer.tenant_claim,
                        own.max_token_size,
                        **checks,  # type: ignore[arg-type]
                    )
                )
                continue
            assert issuer.tenants is not None  # noqa: S101 - required with a template
            register_template(issuer.template, issuer.tenant_claim)
            templates.append(
                TenantRoute(
                    issuer.template,
                    slot,
                    issuer.tenants,
                    issuer.tenant_claim,
                    own.max_token_size,
                    **checks,  # type: ignore[arg-type]
                )
            )
    check_no_exposed_secret(in_code)
    router = KeyRouter(
        slots,
        list(sources.values()),
        clients,
        config.max_token_size,
        static_keys,
        templates=tuple(templates),
        wall=clock,
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
        required=tuple(config.required),
    )
