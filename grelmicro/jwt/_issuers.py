"""Issuers and the key router: which keys may verify which token.

Each trusted issuer gets its own core verifier: its policy names that issuer
alone and its key set holds that issuer's keys alone. With several issuers,
a token goes to the issuer its (unverified) ``iss`` names, so a key of one
issuer can never verify a token claiming another; an ``iss`` nobody
configured is refused before any network call.

:class:`KeyRouter` stands where the verifier otherwise holds one core
verifier: the verifier's cache calls ``router.verify_until(token, now)`` on a miss
only, so a cache hit costs exactly what it costs with static keys. On a miss
the router checks (one clock read and a compare) whether keys are due for a
refresh, then calls the issuer's core verifier; a token naming an unknown
``kid`` may trigger one refetch per cooldown.
"""

from __future__ import annotations

import difflib
import logging
import weakref
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
from grelmicro.jwt._http import Clients, FetchOptions, check_url
from grelmicro.jwt._jwks import FetchBudget, KeySource, KeySourceHealth
from grelmicro.jwt._keys import Key, json_text, key_identity
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["Issuer", "KeyRouter", "build_router"]

logger = logging.getLogger("grelmicro.jwt")

Clock = Callable[[], float]

#: Core refusals that new keys from the provider could turn into acceptance.
_REFETCH_ON = frozenset({"unknown-key", "algorithm"})


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


class _Slot:
    """One issuer's current core verifier and where its keys come from."""

    __slots__ = (
        "__weakref__",
        "clock",
        "core",
        "keys",
        "name",
        "on_removed",
        "policy",
        "source",
    )

    def __init__(
        self,
        name: str,
        policy: _core.Policy,
        source: KeySource | None,
        clock: Clock,
    ) -> None:
        self.name = name
        self.policy = policy
        self.source = source
        self.clock = clock
        self.core: _core.Verifier | None = None
        self.keys: tuple[_core.Key, ...] = ()
        self.on_removed: Callable[[], None] | None = None

    def install(self, key_set: _core.KeySet | None) -> None:
        """Take new keys from the source (None: the keys went past the bound).

        The same keys change nothing; added keys keep the cache unless they
        change which key a cached token selects; a removed key drops the
        cache (results it verified must stop verifying). The rule is the
        core's ``Verifier.keeps_cache_of``, the one ``rotate`` uses.
        """
        if key_set is None:
            self.core = None
            self.keys = ()
            if self.on_removed is not None:
                self.on_removed()
            return
        keys = tuple(key_set.keys)
        if self.core is not None and key_identity(keys) == key_identity(self.keys):
            return
        try:
            core = _core.Verifier(key_set, self.policy)
        except _core.CoreError as exc:
            logger.error(  # noqa: TRY400 - the core error says it all; no traceback
                "issuer %s: new keys not installed: %s", self.name, exc.args[1]
            )
            return
        # First keys of this slot: nothing it verified can be cached yet.
        drop = self.core is not None and not core.keeps_cache_of(self.core)
        self.core = core
        self.keys = keys
        if drop and self.on_removed is not None:
            self.on_removed()

    def verify_until(
        self, token: str | bytes, now: float
    ) -> tuple[Mapping[str, Any], float | None]:
        """Verify with this issuer's keys (refreshed first if due): ``(payload, valid_until)``.

        ``valid_until`` comes from this issuer's core verifier, so its own
        policy (``max_age``) bounds how long the cache serves the result.
        """
        core = self.core
        source = self.source
        if source is not None and (core is None or self.clock() >= source.refresh_at):
            if not source.due(self.clock()) or self.core is None:
                raise source.unavailable()
            core = self.core
        assert core is not None  # noqa: S101 - static slots are built with keys
        try:
            return core.verify_until(token, now)
        except _core.CoreError as exc:
            # A key (or a key of a new algorithm) the provider may have just
            # published: one refetch per cooldown, whatever the flood.
            if (
                source is None
                or exc.args[0] not in _REFETCH_ON
                or not source.after_unknown_kid()
                or self.core is core
            ):
                raise
        newer = self.core
        assert newer is not None  # noqa: S101 - set when core was
        return newer.verify_until(token, now)


class KeyRouter:
    """The engine of a verifier with network keys or several issuers."""

    __slots__ = ("_clients", "_max_size", "_slots", "_sources", "_static_keys", "verify_until")

    #: The engine's ``verify_until(token, now) -> (payload, valid_until)``.
    verify_until: Callable[[str | bytes, float], tuple[Mapping[str, Any], float | None]]

    def __init__(
        self,
        slots: dict[str, _Slot],
        sources: list[KeySource],
        clients: Clients,
        max_token_size: int,
        static_keys: int,
    ) -> None:
        self._slots = slots
        self._sources = sources
        self._clients = clients
        self._max_size = max_token_size
        self._static_keys = static_keys
        if len(slots) == 1:
            # One issuer: its policy checks iss; no routing needed.
            self.verify_until = next(iter(slots.values())).verify_until
        else:
            self.verify_until = self._route

    def _route(self, token: str | bytes, now: float) -> tuple[Mapping[str, Any], float | None]:
        slot = self._slots.get(_core.unverified_issuer(token, self._max_size))  # type: ignore[arg-type]
        if slot is None:
            raise _core.CoreError("issuer", "token issuer is not one of the configured issuers")
        return slot.verify_until(token, now)

    def on_removed(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when an issuer's refresh withdrew a key."""
        for slot in self._slots.values():
            slot.on_removed = callback

    @property
    def algorithms(self) -> list[str]:
        """Algorithms accepted now (by the keys loaded so far)."""
        names: set[str] = set()
        for slot in self._slots.values():
            if slot.core is not None:
                names.update(slot.core.algorithms)
        order = _core.algorithms()
        return sorted(names, key=order.index)

    @property
    def issuers(self) -> tuple[str, ...]:
        """The configured issuers."""
        return tuple(self._slots)

    def source_for(self, token: str | bytes) -> KeySource | None:
        """The key source a token would use (None if static or unroutable)."""
        if len(self._slots) == 1:
            return next(iter(self._slots.values())).source
        try:
            slot = self._slots.get(_core.unverified_issuer(token, self._max_size))  # type: ignore[arg-type]
        except _core.CoreError:
            return None
        return None if slot is None else slot.source

    async def settle(self, token: str | bytes) -> bool:
        """Wait for the fetch the token's verification started, if any."""
        source = self.source_for(token)
        if source is None:
            return False
        flight = source.in_flight()
        if flight is None:
            return False
        await source.wait_async(flight)
        return True

    async def start(self) -> None:
        """Load every source's keys and keep them fresh in the background."""
        for source in self._sources:
            await source.start()

    async def aclose(self) -> None:
        """Stop background refreshes; close the clients we opened."""
        for source in self._sources:
            await source.aclose()
        await self._clients.aclose()

    def close(self) -> None:
        """Sync close: wait for fetch threads, close our sync client."""
        for source in self._sources:
            source.close_threads()
        self._clients.close()

    def health(self) -> KeySourceHealth:
        """Every source's health, combined."""
        return KeySourceHealth.combine(
            [source.health() for source in self._sources], self._static_keys
        )


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


def _static_slot(issuer: Issuer, policy: _core.Policy, clock: Clock) -> tuple[_Slot, int]:
    slot = _Slot(issuer.issuer, policy, None, clock)
    key_set = _static_key_set(issuer.issuer, issuer.keys, issuer.jwks, issuer.allow_symmetric)
    slot.core = _core.call(_core.Verifier, key_set, policy)
    return slot, len(key_set)


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


def build_router(
    config: JWTConfig,
    *,
    jwks_url: str | None,
    discover: str | None,
    issuers: Sequence[Issuer] | None,
    client: object,
    fetch: FetchOptions | None,
    allow_insecure_loopback: bool,
    clock: Clock,
) -> tuple[KeyRouter, JWTConfig]:
    """The router for network keys or several issuers, and the verifier's config."""
    if fetch is None:
        fetch = FetchOptions()
    elif not isinstance(fetch, FetchOptions):
        raise ConfigurationError("fetch must be a FetchOptions")
    config, listed = _check_sources(config, jwks_url, discover, issuers, allow_insecure_loopback)
    clients = Clients(client, fetch)
    budget = FetchBudget(fetch.unknown_kid_budget, fetch.cooldown)
    sources: dict[str, KeySource] = {}

    def source(url: str | None, discovered: str | None, insecure: bool) -> KeySource:
        name = url if url is not None else f"discover:{discovered}"
        found = sources.get(name)
        if found is None:
            found = sources[name] = KeySource(
                jwks_url=url,
                discover=discovered,
                options=fetch,
                clients=clients,
                clock=clock,
                allow_insecure_loopback=insecure,
                budget=budget,
            )
        return found

    slots: dict[str, _Slot] = {}
    static_keys = 0
    if listed is None:
        slot = _Slot(
            config.issuer[0] if len(config.issuer) == 1 else "(any configured issuer)",
            config.policy(),
            source(jwks_url, discover, allow_insecure_loopback),
            clock,
        )
        assert slot.source is not None  # noqa: S101 - built just above
        slot.source.subscribe(slot.install)
        slots[slot.name] = slot
    else:
        for issuer in listed:
            if issuer.issuer in slots:
                raise ConfigurationError(f"issuer {issuer.issuer!r} is configured twice")
            policy = _issuer_config(config, issuer).policy()
            if issuer.jwks_url is not None or issuer.discover:
                slot = _Slot(
                    issuer.issuer,
                    policy,
                    source(
                        issuer.jwks_url,
                        issuer.issuer if issuer.discover else None,
                        issuer.allow_insecure_loopback,
                    ),
                    clock,
                )
                assert slot.source is not None  # noqa: S101 - built just above
                slot.source.subscribe(slot.install)
            else:
                slot, count = _static_slot(issuer, policy, clock)
                static_keys += count
            slots[issuer.issuer] = slot
    router = KeyRouter(slots, list(sources.values()), clients, config.max_token_size, static_keys)
    return router, config


def weak_callback(method: Callable[[], None]) -> Callable[[], None]:
    """A callback that does not keep its object alive (no verifier<->router cycle)."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        target = ref()
        if target is not None:
            target()

    return call
