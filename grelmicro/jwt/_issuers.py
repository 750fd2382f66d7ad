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
refresh, then calls the issuer's core verifier.

A refusal that keys published since the last fetch could turn into
acceptance (:func:`worth_refetch`, the one home of that rule) is final only
once a document fetched after the token arrived answers it; until then the
token's source refetches (within its unknown-kid budget) or the router
answers :class:`~grelmicro.jwt.errors.KeysUnavailableError` (503, with the
time until the next allowed fetch). Only final outcomes leave the router, so
the verifier reports each token once, after any refetch-and-retry.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import logging
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
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
from grelmicro.jwt._fetch import log_event
from grelmicro.jwt._http import Clients, FetchOptions, check_url
from grelmicro.jwt._jwks import KeySource, KeySourceHealth
from grelmicro.jwt._keys import Key, json_text, key_identity
from grelmicro.jwt.errors import ConfigurationError

__all__ = [
    "Issuer",
    "KeyRouter",
    "arrived_at",
    "build_router",
    "network_algorithms",
    "worth_refetch",
]

logger = logging.getLogger("grelmicro.jwt")

Clock = Callable[[], float]

#: Fetch rounds one token may take part in before the router answers 503.
_ROUNDS = 3

#: When the token being verified arrived, if earlier than this call
#: (``verify_async`` retrying after it waited for a fetch).
_ARRIVED: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "grelmicro_jwt_arrived", default=None
)


@contextlib.contextmanager
def arrived_at(when: float) -> Iterator[None]:
    """Verify calls inside count the token as arrived at ``when``."""
    reset = _ARRIVED.set(when)
    try:
        yield
    finally:
        _ARRIVED.reset(reset)


def worth_refetch(
    kind: str, alg: object, refetch_algorithms: frozenset[str], *, kid_held: bool = False
) -> bool:
    """Whether keys the provider may have just published could accept a token.

    The one rule for verify, verify_async and the FastAPI dependency alike:
    no key has the token's ``kid`` (``unknown-key``), or no key held serves
    its ``alg`` while the policy allows it (``algorithm``: a new key of a new
    algorithm). A token naming a ``kid`` the keys hold, with an ``alg`` that
    key does not serve, is refused for what it says (``kid_held``): no
    refetch can change which key that ``kid`` names. Every other refusal is
    about the token, never the keys' timing.
    """
    if kind == "unknown-key":
        return True
    return kind == "algorithm" and not kid_held and alg in refetch_algorithms


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


class _Slot:
    """One issuer's current core verifier and where its keys come from."""

    __slots__ = (
        "__weakref__",
        "clock",
        "core",
        "keys",
        "max_token_size",
        "name",
        "on_removed",
        "policy",
        "refetch_algorithms",
        "source",
    )

    def __init__(
        self,
        name: str,
        policy: _core.Policy,
        source: KeySource | None,
        clock: Clock,
        *,
        refetch_algorithms: frozenset[str] = frozenset(),
        max_token_size: int = 8192,
    ) -> None:
        self.name = name
        self.policy = policy
        self.source = source
        self.clock = clock
        self.core: _core.Verifier | None = None
        self.keys: tuple[_core.Key, ...] = ()
        self.on_removed: Callable[[], None] | None = None
        self.refetch_algorithms = refetch_algorithms
        self.max_token_size = max_token_size

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
        policy (``max_age``) bounds how long the cache serves the result;
        network keys end it at their staleness bound too, so no cache hit
        outlives the keys (the withdrawal at the bound, run by another
        thread, may come late).
        """
        payload, valid_until = self._verified(token, now)
        source = self.source
        if source is None or valid_until is None:
            return payload, valid_until
        return payload, min(valid_until, source.stale_until)

    def _verified(self, token: str | bytes, now: float) -> tuple[Mapping[str, Any], float | None]:
        core = self.core
        source = self.source
        if source is not None and (core is None or self.clock() >= source.schedule.refresh_at):
            if not source.due(self.clock()) or self.core is None:
                raise source.unavailable()
            core = self.core
        assert core is not None  # noqa: S101 - static slots are built with keys
        try:
            return core.verify_until(token, now)
        except _core.CoreError as exc:
            if source is None or not self._worth_refetch(exc.args[0], token):
                raise
        arrived = _ARRIVED.get()
        return self._refetched(
            token, now, core, source, self.clock() if arrived is None else arrived
        )

    def _worth_refetch(self, kind: str, token: str | bytes) -> bool:
        alg = kid = None
        if kind == "algorithm":
            with contextlib.suppress(_core.CoreError):
                header = _core.unverified_header(token, max_token_size=self.max_token_size)
                alg, kid = header.get("alg"), header.get("kid")
        held = isinstance(kid, str) and any(key.kid == kid for key in self.keys)
        return worth_refetch(kind, alg, self.refetch_algorithms, kid_held=held)

    def _refetched(
        self,
        token: str | bytes,
        now: float,
        core: _core.Verifier,
        source: KeySource,
        arrived: float,
    ) -> tuple[Mapping[str, Any], float | None]:
        """The token's answer once keys fetched after it arrived have looked at it.

        Keys from a document fetched before the token arrived may predate its
        key: one fetch (single flight, within the source's budget) first; when
        none may start, 503 with the time until one may.
        """
        for _ in range(_ROUNDS):
            step = source.unknown_kid(arrived)
            if step == "final":
                # Verified again rather than re-raised from a local (no
                # traceback cycle): the keys held now answer for this token.
                return (self.core or core).verify_until(token, now)
            if step != "fetched":
                raise source.unavailable(unknown_kid=True)
            newer = self.core
            if newer is None:
                raise source.unavailable()
            if newer is not core:
                core = newer
                try:
                    return core.verify_until(token, now)
                except _core.CoreError as exc:
                    if not self._worth_refetch(exc.args[0], token):
                        raise
        raise source.unavailable(unknown_kid=True)


def _unknown_issuer(seen: str | None, expected: tuple[str, ...]) -> _core.CoreError:
    """The refusal of a token whose ``iss`` names none of the configured issuers.

    Translated as the single-issuer refusal is: the configured issuers
    (configuration, safe to show), the token's ``iss`` escaped and capped, a
    near miss called out (``_core.translate``).
    """
    if seen is None:
        error = _core.CoreError("issuer", "token has no iss claim (a string) to choose an issuer")
        error.context = {"expected": expected}
    else:
        error = _core.CoreError("issuer", "token issuer is not one of the configured issuers")
        error.context = {"expected": expected, "seen": (seen,)}
    return error


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
        issuer = _core.unverified_issuer(token, self._max_size)
        slot = None if issuer is None else self._slots.get(issuer)
        if slot is None:
            raise _unknown_issuer(issuer, tuple(self._slots))
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
        """Wait for the fetch the token's verification started (or joined), if any."""
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
    clock: Clock,
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
                clock=clock,
                allow_insecure_loopback=insecure,
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
            refetch_algorithms=network_algorithms(config),
            max_token_size=config.max_token_size,
        )
        assert slot.source is not None  # noqa: S101 - built just above
        slot.source.subscribe(slot.install)
        slots[slot.name] = slot
    else:
        for issuer in listed:
            if issuer.issuer in slots:
                raise ConfigurationError(f"issuer {issuer.issuer!r} is configured twice")
            own = _issuer_config(config, issuer)
            policy = own.policy()
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
                    refetch_algorithms=network_algorithms(own),
                    max_token_size=own.max_token_size,
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
