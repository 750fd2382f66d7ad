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
from grelmicro.jwt._router import KeyRouter, Precheck, Slot, static_slot
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["Issuer", "build_router", "network_algorithms"]

logger = logging.getLogger("grelmicro.jwt")


def network_algorithms(config: JWTConfig) -> frozenset[str]:
    """Algorithms a fetched key could bring: the policy's, public-key ones only."""
    names = config.algorithms if config.algorithms is not None else _core.algorithms()
    return frozenset(name for name in names if not name.startswith("HS"))


class Issuer:
    """One trusted issuer: where its keys come from, and its own policy.

    Exactly one key source: ``keys``, ``jwks``, ``jwks_url`` or
    ``discover=True`` (OpenID Connect discovery at the issuer's URL).

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
        "issuer",
        "jwks",
        "jwks_url",
        "keys",
        "policy",
    )

    issuer: str
    keys: tuple[Key, ...] | None
    jwks: Mapping[str, Any] | str | bytes | None
    jwks_url: str | None
    discover: bool
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
        discover: bool = False,
        allow_symmetric: bool = False,
        allow_insecure_loopback: bool = False,
        allow_weaker: Collection[str] = (),
        **policy: Unpack[IssuerSettings],
    ) -> None:
        if not isinstance(issuer, str) or not issuer:
            raise ConfigurationError("an issuer is a non-empty string")
        check_flags(
            discover=discover,
            allow_symmetric=allow_symmetric,
            allow_insecure_loopback=allow_insecure_loopback,
        )
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
        if discover:
            check_url(issuer, "discover", allow_insecure_loopback=allow_insecure_loopback)
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
            "discover=True"
            if self.discover
            else f"jwks_url={self.jwks_url!r}"
            if self.jwks_url
            else "static keys"
        )
        return f"Issuer({self.issuer!r}, {source})"


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
    values["issuer"] = (issuer.issuer,)
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

    def source(url: str | None, discovered: str | None, insecure: bool) -> KeySource:
        name = url if url is not None else f"discover:{discovered}"
        found = sources.get(name)
        if found is None:
            _count_built(url if url is not None else str(discovered))
            found = sources[name] = KeySource(
                jwks_url=url,
                discover=discovered,
                options=fetch,
                clients=clients,
                allow_insecure_loopback=insecure,
                timer=fetch.timer or time.monotonic,
                wall=clock,
            )
        return found

    slots: dict[str, Slot] = {}
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
        for issuer in listed:
            if issuer.issuer in slots:
                raise ConfigurationError(f"issuer {issuer.issuer!r} is configured twice")
            own = _issuer_config(config, issuer)
            policy = own.policy()
            if issuer.jwks_url is not None or issuer.discover:
                slot = Slot(
                    issuer.issuer,
                    policy,
                    source(
                        issuer.jwks_url,
                        issuer.issuer if issuer.discover else None,
                        issuer.allow_insecure_loopback,
                    ),
                    refetch_algorithms=network_algorithms(own),
                    max_token_size=own.max_token_size,
                    precheck=_precheck(own),
                )
            else:
                slot, count = _static_slot(issuer, policy)
                static_keys += count
            slots[issuer.issuer] = slot
    router = KeyRouter(slots, list(sources.values()), clients, config.max_token_size, static_keys)
    return router, config


def _precheck(config: JWTConfig) -> Precheck:
    """What a token must pass, unverified, before it spends a key fetch."""
    return Precheck(
        issuers=tuple(config.issuer),
        audiences=tuple(config.audience),
        leeway=float(config.leeway),
        max_token_size=config.max_token_size,
    )
