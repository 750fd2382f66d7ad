"""JWTVerifier: built once, then ``verify()`` on every request.

The whole verification of a token is one call into the core. ``verify`` is
not a Python method but the core's ``VerifyCall`` object, built once per
verifier: a cache hit, or the whole check and the store, with no Python
frame in between (on free-threaded CPython every shared object a request
touches costs an atomic count update from every thread, so a request
touches as few as possible: see ``docs/design-notes.md``). Refusals come
back through :func:`_refusal`, which translates the core's error into the
taxonomy and reports it. Rotation installs a new route (engine and cache)
into the same object, so any reference to ``verify`` follows
:meth:`JWTVerifier.rotate`.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn, Protocol, cast

from typing_extensions import Unpack

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._build import build_router, lift_template
from grelmicro.jwt._cache import TokenCache
from grelmicro.jwt._claims import Claims
from grelmicro.jwt._config import ENV_PREFIX, AlgorithmName, JWTConfig, JWTSettings, env_flag
from grelmicro.jwt._config import check_flags as _check_flags
from grelmicro.jwt._discovery import discovery_urls
from grelmicro.jwt._events import Observer
from grelmicro.jwt._health import KeySourceHealth
from grelmicro.jwt._http import FetchOptions
from grelmicro.jwt._issuers import Issuer
from grelmicro.jwt._jwks import KeySource
from grelmicro.jwt._keys import Key, json_text, key_identity, note_padded
from grelmicro.jwt._outcomes import Outcomes
from grelmicro.jwt._router import KeyRouter
from grelmicro.jwt._runner import LoopThread
from grelmicro.jwt._steps import Pending, drive_async
from grelmicro.jwt._tenants import TENANT_TTL, TenantsOption
from grelmicro.jwt.errors import (
    ConfigurationError,
    KeysUnavailableError,
    TokenRejectedError,
    WeakKeyError,
)
from grelmicro.jwt.otel import Reporter, Telemetry

__all__ = ["CacheInfo", "JWTVerifier", "VerifyFunction"]

logger = logging.getLogger("grelmicro.jwt")

#: Serialises rotate() of keys given in code (rare). Network keys never take
#: it: their route changes under the router's own lock.
_ROTATION = threading.Lock()
_lifecycle.renew_lock_after_fork(globals(), "_ROTATION")  # a child's copy may be held

Clock = Callable[[], float]


class _NotADependency:
    """Marks the token parameter of ``verify`` so FastAPI refuses it as a dependency.

    ``Depends(verifier.verify)`` would make FastAPI read ``token`` (and ``now``)
    from the query string. Building the route's parameter model asks this
    marker for a pydantic schema, and it answers with a configuration error
    that says what to write instead, when the route is declared.
    """

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: object) -> NoReturn:
        raise ConfigurationError(
            "Depends(verifier.verify) would read the token from the query string; write "
            "auth = JWTBearer(verifier) (from grelmicro.jwt.fastapi) and use Depends(auth) "
            "or Security(auth, scopes=[...])"
        )


#: ``str | bytes`` for type checkers; a refusal for FastAPI's dependency analysis.
Token = Annotated[str | bytes, _NotADependency]
RejectHook = Callable[[TokenRejectedError], None]


class VerifyFunction(Protocol):
    """``verify(token, *, now=None) -> Claims``."""

    def __call__(self, token: str | bytes, /, *, now: float | None = None) -> Claims:
        """Verify ``token`` and return its claims.

        Args:
            token: the compact JWS, as ``str`` or ``bytes`` (a header value).
            now: the time to check against, in seconds since the epoch;
                defaults to the verifier's clock.

        Raises:
            TokenRejectedError: the token is refused (a subclass names why).
        """
        ...


@dataclass(frozen=True)
class CacheInfo:
    """A snapshot of the cache: counters (when ``cache_stats=True``) and sizes.

    The counters are plain integers bumped without a lock (a hit must not
    take one), so under concurrent threads they are close, not exact.
    """

    hits: int | None
    misses: int | None
    size: int
    max_size: int


def _report(error: TokenRejectedError, hook: RejectHook | None) -> None:
    # The verifier's hook emits token.refused (its DEBUG log record) first.
    if hook is not None:
        try:
            hook(error)
        except Exception:  # a metrics hook must never turn a 401 into a 500
            logger.exception("on_reject hook failed")


def _rejected(exc: _core.CoreError, hook: RejectHook | None) -> TokenRejectedError:
    error = _core.translate(exc)
    assert isinstance(error, TokenRejectedError)  # noqa: S101 - core invariant
    return _reported(error, hook)


def _reported(error: TokenRejectedError, hook: RejectHook | None) -> TokenRejectedError:
    _report(error, hook)
    return error


def _usable_time(now: object) -> bool:
    """Whether ``now`` is a time the core takes (a bad one raises TypeError/OverflowError)."""
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        return False
    try:
        float(now)
    except OverflowError:
        return False
    return True


def _refusal(
    hook: RejectHook | None,
    clock: Clock,
    finish: Callable[[Pending], Any] | None = None,
    outcomes: Outcomes | None = None,
) -> Callable[[BaseException, object], NoReturn]:
    """What ``verify`` raises instead of a failure of the core call.

    A ``CoreError`` becomes its :class:`TokenRejectedError` subclass
    (reported to ``hook`` and the log); a ``now`` (or a clock answer) that is
    not a usable time becomes the ``ClaimsRejectedError`` that says so;
    a ``KeysUnavailableError`` is a ``token.refused`` event of ``outcomes``;
    anything else (a failing clock or claims type) goes through unchanged.
    """

    def refuse(error: BaseException, now: object) -> NoReturn:
        if isinstance(error, Pending) and finish is not None:
            error.bind(finish)  # verify_async and the FastAPI dependency finish it
            raise error
        if isinstance(error, KeysUnavailableError) and outcomes is not None:
            outcomes.refused(error)  # a 503 (a Pending's outcome is reported when it ends)
        if isinstance(error, _core.CoreError):
            # Raised straight from here, never kept in a local: a local would
            # tie error -> traceback -> frame -> error into a reference cycle.
            raise _rejected(error, hook) from None
        if isinstance(error, (TypeError, OverflowError)):
            when = clock() if now is None else now  # what the core was given
            if not _usable_time(when):
                raise _reported(_core.invalid_now(when), hook) from None
        raise error

    return refuse


class Engine(Protocol):
    """What a route verifies with: the core's ``Verifier``, or the key router."""

    def verify_until(self, token: str | bytes, now: float) -> tuple[Any, float | None]:
        """``(payload, valid_until)`` of ``token`` at ``now``, or the refusal."""
        ...

    @property
    def algorithms(self) -> list[str]:
        """Algorithms accepted now."""
        ...


def _finisher(verifier: JWTVerifier) -> Callable[[Pending], Any]:
    """How a :class:`Pending` raised by ``verifier.verify`` is finished (held weakly)."""
    ref = weakref.ref(verifier)

    async def finish(pending: Pending) -> Claims:
        target = ref()
        if target is None:
            raise pending
        return await target._finish(pending)

    return finish


def _weak_call(verifier: JWTVerifier, method: Callable[[JWTVerifier], None]) -> Callable[[], None]:
    """``method(verifier)`` without keeping ``verifier`` alive (no verifier<->router cycle)."""
    ref = weakref.ref(verifier)

    def call() -> None:
        target = ref()
        if target is not None:
            method(target)

    return call


def _no_cache(engine: Engine, clock: Clock) -> TokenCache:
    """The route without a cache: ``Claims(engine.verify(token, now))``."""
    return TokenCache(
        0,
        0.0,
        key="token",
        max_token_size=0,
        verify=engine.verify_until,
        claims=Claims,
        clock=clock,
    )


#: What ``inspect.signature(verifier.verify)`` reports: FastAPI reads it, and
#: the ``token`` annotation refuses ``Depends(verifier.verify)``.
_SIGNATURE = inspect.Signature(
    [
        inspect.Parameter("token", inspect.Parameter.POSITIONAL_ONLY, annotation=Token),
        inspect.Parameter(
            "now", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=float | None
        ),
    ],
    return_annotation=Claims,
)


#: Guards the lazy creation of a verifier's :class:`LoopThread`.
_RUNNERS = threading.Lock()
_lifecycle.renew_lock_after_fork(globals(), "_RUNNERS")
#: How long ``close()`` waits for ``start_sync()``'s thread to close its sources.
_RUNNER_JOIN = 10.0


class JWTVerifier:
    """Verifies bearer tokens against keys and a policy; built once, shared freely.

    Example:
        >>> verifier = JWTVerifier(
        ...     keys=[Key.pem(public_pem, "RS256", kid="k1")],
        ...     audience="https://api.example.com",
        ...     issuer="https://idp.example.com/",
        ... )  # doctest: +SKIP
        >>> claims = verifier.verify(token)  # doctest: +SKIP

    Keys come from ``keys`` (a list of :class:`Key`) or ``jwks`` (a JWKS
    document as a mapping or JSON text). Every other setting is a field of
    :class:`JWTConfig`; pass them as keywords (typed by :class:`JWTSettings`,
    whose keys are exactly those fields) or pass ``config=``.

    A multi-tenant issuer (Entra ID's ``common``) is an ``issuer`` template
    with ``{tenantid}`` in place of the tenant, with ``tenants=`` the
    tenants to accept (a list of ids, a callable, or ``"any"``) and
    ``discover=`` the URL whose metadata names the template; the tenant claim
    (``tenant_claim``, ``tid``) must equal the tenant the ``iss`` names (see
    :class:`Issuer` and ``docs/issuers.md``).

    ``verify(token, *, now=None)`` returns :class:`Claims` or raises a
    :class:`TokenRejectedError` subclass. It is safe to call from any number
    of threads, including on free-threaded Python. ``rotate(...)`` swaps in
    new keys (and a fresh cache) atomically.
    """

    __slots__ = {
        "__weakref__": None,
        "_cache": None,
        "_clock": None,
        "_counters": None,
        "_engine": None,
        "_hook": None,
        "_keys": None,
        "_loop_thread": None,
        "_outcomes": None,
        "_router": None,
        "_skipped": None,
        "config": None,
        "verify": (
            "``verify(token, /, *, now=None) -> Claims``: verify ``token`` and return its "
            "claims, or raise a TokenRejectedError subclass. Safe from any number of "
            "threads; a reference taken once (``check = verifier.verify``) follows "
            "rotate(). ``token`` is the compact JWS as str or bytes (without the Bearer "
            "scheme); ``now`` is the time to check against (default: the clock)."
        ),
    }

    config: JWTConfig
    _engine: Engine
    _cache: TokenCache | None
    _clock: Clock
    _hook: RejectHook | None
    _counters: list[int] | None
    _router: KeyRouter | None
    _loop_thread: LoopThread | None
    _keys: tuple[_core.Key, ...]
    _skipped: tuple[tuple[str | None, str], ...]
    _outcomes: Outcomes
    verify: VerifyFunction

    def __init__(
        self,
        keys: Sequence[Key] | None = None,
        *,
        jwks: Mapping[str, Any] | str | bytes | None = None,
        jwks_url: str | None = None,
        discover: str | None = None,
        issuers: Sequence[Issuer] | None = None,
        client: object = None,
        fetch: FetchOptions | None = None,
        allow_insecure_loopback: bool = False,
        allow_symmetric: bool = False,
        config: JWTConfig | None = None,
        clock: Clock | None = None,
        on_reject: RejectHook | None = None,
        cache_stats: bool = False,
        telemetry: bool | Telemetry = False,
        tenants: TenantsOption | None = None,
        tenant_claim: str = "tid",
        tenants_ttl: float = TENANT_TTL,
        **settings: Unpack[JWTSettings],
    ) -> None:
        # The setting keywords are JWTConfig's fields (JWTSettings): a
        # misspelt one is refused by the config, naming the closest field.
        given = {name: value for name, value in settings.items() if value is not None}
        _check_flags(
            allow_symmetric=allow_symmetric,
            allow_insecure_loopback=allow_insecure_loopback,
            cache_stats=cache_stats,
        )
        if config is not None and not isinstance(config, JWTConfig):
            raise ConfigurationError("config must be a JWTConfig (or pass settings as keywords)")
        if config is not None:
            if given:
                raise ConfigurationError(
                    "pass either config= or individual settings, not both: "
                    + ", ".join(sorted(given))
                )
        else:
            config = JWTConfig.build(**given)
        if clock is not None and not callable(clock):
            raise ConfigurationError("clock must be a callable returning seconds")
        if on_reject is not None and not callable(on_reject):
            raise ConfigurationError("on_reject must be a callable")
        # Outcomes are events (_outcomes.py): token.refused on the refusal path;
        # token.accepted on misses only when telemetry counts them (a frame per
        # miss, none per hit: hits are read from the cache's counters).
        options = Telemetry.of(telemetry)
        reporter = None if options is None else Reporter(options)
        outcomes = Outcomes(
            announce_accepted=options is not None, timed=options is not None and options.latency
        )
        on_reject = outcomes.on_reject(on_reject)
        object.__setattr__(self, "_outcomes", outcomes)
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "_clock", clock or time.time)
        object.__setattr__(self, "_hook", on_reject)
        counting = cache_stats or reporter is not None
        object.__setattr__(self, "_counters", [0, 0] if counting else None)
        object.__setattr__(self, "_router", None)
        object.__setattr__(self, "_loop_thread", None)
        object.__setattr__(self, "_skipped", ())
        # issuer="...{tenantid}..." (with tenants=) is the one template Issuer it means.
        config, template = lift_template(
            config,
            keys=keys,
            jwks=jwks,
            jwks_url=jwks_url,
            discover=discover,
            tenants=tenants,
            tenant_claim=tenant_claim,
            tenants_ttl=tenants_ttl,
            several=issuers is not None,
            allow_symmetric=allow_symmetric,
            allow_insecure_loopback=allow_insecure_loopback,
        )
        if template is not None:
            keys = jwks = jwks_url = discover = None
            issuers = [template]
            object.__setattr__(self, "config", config)
        if jwks_url is None and discover is None and issuers is None:
            outcomes.bind(config.issuer, _allowed(config))
            if reporter is not None:
                reporter.attach(self, ())
            self._install_static(keys, jwks, allow_symmetric=allow_symmetric)
            return
        # Keys from the network, or several issuers each bound to its keys.
        if keys is not None or jwks is not None:
            raise ConfigurationError(
                "give one key source: keys/jwks, jwks_url, discover or issuers=[...]"
            )
        router, config = build_router(
            config,
            jwks_url=jwks_url,
            discover=discover,
            issuers=issuers,
            client=client,
            fetch=fetch,
            allow_insecure_loopback=allow_insecure_loopback,
            clock=self._clock,
        )
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "_router", router)
        outcomes.bind((*config.issuer, *router.issuers), _allowed(config), router.templates)
        if reporter is not None:
            reporter.attach(self, router.sources)
        router.on_removed(_weak_call(self, JWTVerifier._drop_cache))
        self._install_engine(router)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("JWTVerifier is immutable; use rotate() to change keys")

    @classmethod
    def from_env(
        cls,
        keys: Sequence[Key] | None = None,
        *,
        jwks: Mapping[str, Any] | str | bytes | None = None,
        environ: Mapping[str, str] | None = None,
        prefix: str = ENV_PREFIX,
        allow_key_material_from_env: bool = False,
        **options: Any,
    ) -> JWTVerifier:
        """Build from ``GRELMICRO_JWT_*`` variables (``AUDIENCE``, ``ISSUER``, ``LEEWAY``...).

        Keys from the network: ``{prefix}JWKS_URL`` or ``{prefix}DISCOVER``
        (an issuer URL for OpenID Connect discovery), with
        ``{prefix}ALLOW_INSECURE_LOOPBACK=true`` for plain ``http`` on a
        loopback address. URLs are not key material: no opt-in is needed.
        A keyword given to ``from_env`` wins over its variable.

        Key material is read from the environment only with
        ``allow_key_material_from_env=True``: ``{prefix}SECRET`` (with
        ``SECRET_ALGORITHM``, default HS256, and ``SECRET_KID``),
        ``{prefix}PUBLIC_KEY`` (PEM, with ``PUBLIC_KEY_ALGORITHM`` and
        ``PUBLIC_KEY_KID``) or ``{prefix}JWKS`` (JSON text).

        An issuer template (``{prefix}ISSUER`` with ``{tenantid}``) takes its
        tenants from ``{prefix}TENANTS`` (comma-separated ids, or ``any``) and
        its tenant claim from ``{prefix}TENANT_CLAIM``.

        A misspelt ``{prefix}*`` variable is an error naming the closest
        valid one, the network variables first (``JWKS_URI`` is meant as
        ``JWKS_URL``, not as key material).
        """
        source = os.environ if environ is None else environ
        _check_flags(allow_key_material_from_env=allow_key_material_from_env)
        # Policy settings go to the config; the rest (allow_symmetric, clock,
        # on_reject, ...) to the constructor, which checks them.
        settings = {k: options.pop(k) for k in list(options) if k in JWTConfig.model_fields}
        accepted = inspect.signature(cls).parameters
        for name in options:
            if name not in accepted or name in ("keys", "jwks", "config"):
                close = difflib.get_close_matches(name, [*accepted, *JWTConfig.model_fields], n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise ConfigurationError(f"from_env() got an unknown option {name}{hint}")
        config = JWTConfig.from_env(
            source,
            prefix=prefix,
            known=(*_NETWORK_ENV, *_TENANT_ENV, *_KEY_ENV),
            preferred=_NETWORK_ENV,
            **settings,
        )
        for name in (*_NETWORK_ENV, *_TENANT_ENV, *_KEY_ENV):
            if prefix + name in source and not source[prefix + name].strip():
                raise ConfigurationError(f"{prefix}{name} is empty; unset it or give a value")
        # Keys from the network: URLs, not key material (no opt-in needed).
        if prefix + "JWKS_URL" in source:
            options.setdefault("jwks_url", source[prefix + "JWKS_URL"].strip())
        if prefix + "DISCOVER" in source:
            options.setdefault("discover", source[prefix + "DISCOVER"].strip())
        if prefix + "ALLOW_INSECURE_LOOPBACK" in source:
            variable = prefix + "ALLOW_INSECURE_LOOPBACK"
            options.setdefault("allow_insecure_loopback", env_flag(variable, source[variable]))
        _tenant_options(source, prefix, options)
        env_keys: list[Key] = []
        env_jwks = None
        material = [n for n in ("SECRET", "PUBLIC_KEY", "JWKS") if prefix + n in source]
        if material and not allow_key_material_from_env:
            raise ConfigurationError(
                "key material found in the environment ("
                + ", ".join(prefix + n for n in material)
                + "); pass allow_key_material_from_env=True to use it"
            )
        if prefix + "SECRET" in source:
            env_keys.append(
                Key.secret(
                    source[prefix + "SECRET"],
                    cast("AlgorithmName", source.get(prefix + "SECRET_ALGORITHM", "HS256")),
                    kid=source.get(prefix + "SECRET_KID"),
                )
            )
        if prefix + "PUBLIC_KEY" in source:
            algorithm = source.get(prefix + "PUBLIC_KEY_ALGORITHM")
            if algorithm is None:
                raise ConfigurationError(prefix + "PUBLIC_KEY_ALGORITHM is required")
            env_keys.append(
                Key.pem(
                    source[prefix + "PUBLIC_KEY"],
                    cast("AlgorithmName", algorithm),
                    kid=source.get(prefix + "PUBLIC_KEY_KID"),
                )
            )
        if prefix + "JWKS" in source:
            env_jwks = source[prefix + "JWKS"]
        all_keys = [*(keys or ()), *env_keys] or None
        return cls(all_keys, jwks=jwks if jwks is not None else env_jwks, config=config, **options)

    def _install(self, key_set: _core.KeySet) -> None:
        """Install ``key_set``; thread-safe, callable from any thread.

        Keys are compared by fingerprint and kid. The same keys change
        nothing (same engine, same cache). Added keys build a new engine and
        keep the cache when nothing cached can have changed meaning (the
        core's rule: ``Verifier.keeps_cache_of``, beside its key selection).
        Any removal starts a fresh cache, so no result a removed key verified
        outlives it.
        """
        new_keys = tuple(key_set.keys)
        with _ROTATION:
            old_keys: tuple[_core.Key, ...] | None = getattr(self, "_keys", None)
            if old_keys is not None and key_identity(old_keys) == key_identity(new_keys):
                return
            core = _core.call(_core.Verifier, key_set, self.config.policy())
            engine = self._engine if old_keys is not None else None
            keep = isinstance(engine, _core.Verifier) and core.keeps_cache_of(engine)
            self._activate(core, self._cache if keep else None)
            object.__setattr__(self, "_keys", new_keys)

    def _activate(self, engine: Engine, cache: TokenCache | None) -> None:
        """Point ``verify`` at ``engine`` and ``cache`` (a fresh one when None).

        ``verify`` reads one route, bound to one engine and one cache: a
        request sees the old keys or the new ones, and a result is only ever
        stored in the cache of the engine that verified it. Call it holding
        ``_ROTATION``.
        """
        config = self.config
        object.__setattr__(self, "_engine", engine)  # the core's own (keeps_cache_of reads it)
        engine = self._outcomes.engine(engine)  # announces accepted misses, when asked to
        if cache is not None:  # kept across an addition of keys: same table, new engine
            cache = cache.rebind(engine.verify_until)
        else:
            old: TokenCache | None = getattr(self, "_cache", None)
            counters = self._counters
            if old is not None and counters is not None:
                hits, misses = old.counts or (0, 0)
                counters[0] += hits  # the retired caches' totals
                counters[1] += misses
            if config.cache_size:
                cache = TokenCache(
                    config.cache_size,
                    config.cache_ttl,
                    key=config.cache_key,
                    max_token_size=config.max_token_size,
                    verify=engine.verify_until,
                    claims=Claims,
                    clock=self._clock,
                    count=counters is not None,
                )
        object.__setattr__(self, "_cache", cache)
        route = (cache if cache is not None else _no_cache(engine, self._clock))._table
        front: _core.VerifyCall | None = getattr(self, "verify", None)
        if front is None:  # the first route: the one verify object is born with it
            object.__setattr__(
                self,
                "verify",
                _core.VerifyCall(
                    route,
                    clock=self._clock,
                    refuse=_refusal(self._hook, self._clock, _finisher(self), self._outcomes),
                    signature=_SIGNATURE,
                ),
            )
        else:
            front.install(route)

    def rotate(
        self,
        keys: Sequence[Key] | None = None,
        *,
        jwks: Mapping[str, Any] | str | bytes | None = None,
        allow_symmetric: bool = False,
    ) -> None:
        """Replace the keys; the policy stays.

        The cache is kept when keys were only added, and started afresh
        when any key was removed (see ``_install``).
        """
        if self._router is not None:
            raise ConfigurationError("this verifier's keys come from the network; rotate() is off")
        self._install_static(keys, jwks, allow_symmetric=allow_symmetric)

    def _install_static(
        self,
        keys: Sequence[Key] | None,
        jwks: Mapping[str, Any] | str | bytes | None,
        *,
        allow_symmetric: bool,
    ) -> None:
        """Install keys given in code; ``health()`` lists the keys left out."""
        key_set, skipped = _key_set(keys, jwks, allow_symmetric=allow_symmetric)
        self._install(key_set)
        object.__setattr__(self, "_skipped", skipped)

    # -- keys from the network: engine, lifecycle, health -----------------

    def _install_engine(self, router: KeyRouter) -> None:
        """Build ``verify`` around the key router, with a fresh cache (at construction)."""
        self._activate(router, None)

    def _drop_cache(self) -> None:
        """A new route removed keys: no cached result may outlive them.

        Called by the router inside its route swap (its lock, the only one
        held): the route and the fresh cache change in one step.
        """
        if self._router is not None:
            self._activate(self._router, None)

    async def verify_async(self, token: Token, /, *, now: float | None = None) -> Claims:
        """Asynchronous :meth:`verify`; may await the key fetch the token needs.

        With network keys, a token arriving before any key is loaded, or
        naming a key the keys held may predate, waits on the event loop for
        the fetch that answers it instead of failing at once; the token's
        arrival is the start of this call, and its outcome is reported once.
        """
        try:
            return self.verify(token, now=now)
        except Pending as pending:
            return await pending.finish()  # type: ignore[no-any-return]

    async def _finish(self, pending: Pending) -> Claims:
        """Drive a :class:`Pending` miss to its end; report the outcome once."""
        outcomes = self._outcomes
        router = self._router
        read: list[int] = []  # the route epoch before the last step ran

        def note() -> None:
            read[:] = [router.route.epoch] if router is not None else []

        try:
            result = await drive_async(pending.steps, pending.first, note)
        except _core.CoreError as exc:
            raise _rejected(exc, self._hook) from None
        except KeysUnavailableError as exc:
            outcomes.refused(exc)
            raise
        finally:
            pending.steps.close()
        if outcomes.announce_accepted:
            outcomes.accepted(pending.token, result)
        claims = Claims(result[0])
        self._keep(pending, claims, result, read)
        return claims

    def _keep(self, pending: Pending, claims: Claims, result: Any, read: list[int]) -> None:
        """Store a waited answer like any miss (the next request with it is a hit).

        Only in the cache of the route it was read from: when no route that
        dropped the cache came between the last step and the store, the
        current cache is that route's; otherwise the answer is not kept.
        """
        router = self._router
        if router is None or not read:
            return
        cache = self._cache
        if cache is None or router.route.epoch != read[0]:
            return
        cache.store(pending.token, claims, result[0], result[1], pending.now)

    def observe(self, observer: Observer, *, on_thread: bool = False) -> None:
        """Let ``observer`` hear this verifier's events from now on.

        Observers run off the event loop (a library thread delivers events
        emitted on a loop's thread, in order), so a slow one never stalls
        requests. ``on_thread=True`` runs ``observer`` on the emitting thread
        instead, for an observer that reads the caller's context (the
        current trace span) and never blocks: OpenTelemetry's reporter does.

        Key sources' events (``keys.fetch``, ``keys.refreshed``...) and
        verification outcomes: ``token.refused`` for each refusal or 503, and
        with ``telemetry=`` on, ``token.accepted`` for each full verification
        that accepts (never one per cache hit). An event holds no token text
        or key material, and its fields only bounded values; an observer
        that raises is logged once
        and skipped, never failing a request or a fetch. Event names and
        fields are listed in ``docs/observability.md``.
        """
        if not callable(observer):
            raise ConfigurationError("observer must be a callable taking an event")
        self._outcomes.observers.add(observer, inline=on_thread)
        for source in self._key_sources():
            source.observers.add(observer, inline=on_thread)

    def _key_sources(self) -> tuple[KeySource, ...]:
        """The network key sources (for ``fastapi/``, ``otel`` and tests; empty: static)."""
        router = self._router
        return () if router is None else router.sources

    async def start(self) -> None:
        """Load network keys and refresh them in the background (no-op for static keys).

        A fetch failure is logged and shown by :meth:`health`, not raised:
        the service starts, answers 503 until keys arrive, and keeps trying.
        """
        if self._router is not None:
            await self._router.start()

    async def aclose(self) -> None:
        """Stop the background refresh and close the HTTP clients it opened."""
        if self._router is not None:
            await self._router.aclose()

    def start_sync(self) -> None:
        """:meth:`start` for apps without an event loop (WSGI workers): load keys, keep them fresh.

        Runs :meth:`start` on an event loop in a library thread and returns
        once it has: keys are loaded (or the failure is logged and shown by
        :meth:`health`, as with :meth:`start`), so ``/ready`` is true before
        the first request. That loop then runs the background refresh and
        every key fetch; request threads only wait for one (at most
        ``key_wait``). :meth:`close` stops it. Calling it again while it
        runs does nothing; a no-op for static keys.

        In a server that forks workers (``gunicorn --preload``, uWSGI
        without ``lazy-apps``), call it in each worker (gunicorn's
        ``post_fork`` hook): a forked child has no thread of its parent's
        and fetches on its own connections; its keys still load on first
        need without it, but ``/ready`` and the refresh wait for traffic.
        In a uWSGI master (which forks its workers in C) it loads the keys
        and starts no thread: a thread holding the GIL at that fork would
        leave the worker waiting for it forever.
        """
        router = self._router
        if router is None:
            return
        _lifecycle.adopt_unseen_fork()  # uWSGI forks without Python's fork hooks
        if _lifecycle.in_uwsgi_master():
            # Workers are forked from here in C: keys load now, in this
            # thread's time, and no thread is left to hold the GIL at a
            # fork. Each worker's start_sync (a postfork hook) starts its own.
            router.load_sync()
            return
        with _RUNNERS:
            runner = self._loop_thread
            if runner is None:
                runner = LoopThread()
                object.__setattr__(self, "_loop_thread", runner)
        runner.start(router.start, router.aclose)

    def close(self) -> None:
        """Close for sync apps: stop :meth:`start_sync`'s thread, wait for a fetch thread.

        Also closes the HTTP clients the verifier opened. Keys are not
        fetched again afterwards (until ``start_sync()`` or ``await
        start()``): the loaded keys serve until their staleness bound, then
        verification raises :class:`KeysUnavailableError`.
        """
        runner = self._loop_thread
        if runner is not None and runner.running:
            runner.stop(_RUNNER_JOIN)
        if self._router is not None:
            self._router.close()

    async def __aenter__(self) -> JWTVerifier:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self) -> JWTVerifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def health(self) -> KeySourceHealth:
        """Whether keys are loaded and fresh enough, with counters (static keys: ready)."""
        if self._router is None:  # static keys: nothing to fetch, no counters
            return KeySourceHealth(
                ready=True, key_count=len(self._keys), skipped_keys=self._skipped
            )
        return self._router.health()

    @property
    def discovery_url(self) -> str | None:
        """The OpenID Connect discovery URL when the only key source is ``discover=``.

        ``None`` for static keys, a JWKS URL or several issuers. The FastAPI
        dependency shows it as the OpenAPI ``openIdConnect`` scheme.
        """
        sources = self._key_sources()
        if len(sources) != 1:
            return None
        issuer = sources[0].discover
        if not isinstance(issuer, str) or not issuer:
            return None
        return discovery_urls(issuer)[0]

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Algorithms accepted by this verifier."""
        return tuple(self._engine.algorithms)

    def cache_info(self) -> CacheInfo:
        """Cache counters and size (counters are ``None`` unless ``cache_stats=True``)."""
        cache = self._cache
        counters = self._counters
        hits, misses = (None if cache is None else cache.counts) or (0, 0)
        return CacheInfo(
            hits=None if counters is None else counters[0] + hits,
            misses=None if counters is None else counters[1] + misses,
            size=0 if cache is None else len(cache),
            max_size=self.config.cache_size,
        )

    def __repr__(self) -> str:
        # Safe on a half-built verifier (a failed __init__ leaves slots unset).
        try:
            algorithms = list(self.algorithms)
        except AttributeError:
            algorithms = []
        config = getattr(self, "config", None)
        if config is None:
            return "JWTVerifier(<not built>)"
        return (
            f"JWTVerifier(algorithms={algorithms!r}, "
            f"audience={list(config.audience)!r}, issuer={list(config.issuer)!r})"
        )


#: ``{prefix}*`` variables naming where keys are fetched (a near miss is
#: matched to these first: a misspelt URL variable must not be read as a
#: hint towards key material).
_NETWORK_ENV = ("JWKS_URL", "DISCOVER", "ALLOW_INSECURE_LOOPBACK")

#: ``{prefix}*`` variables of an issuer template's tenants (not key material).
_TENANT_ENV = ("TENANTS", "TENANT_CLAIM")


def _tenant_options(source: Mapping[str, str], prefix: str, options: dict[str, Any]) -> None:
    """``tenants`` (ids, comma-separated, or ``any``) and ``tenant_claim`` from the environment."""
    if prefix + "TENANTS" in source:
        text = source[prefix + "TENANTS"].strip()
        listed = [item.strip() for item in text.split(",")]
        if text != "any" and not all(listed):
            raise ConfigurationError(f"{prefix}TENANTS has an empty item; list tenant ids or any")
        options.setdefault("tenants", "any" if text == "any" else listed)
    if prefix + "TENANT_CLAIM" in source:
        options.setdefault("tenant_claim", source[prefix + "TENANT_CLAIM"].strip())


#: ``{prefix}*`` variables of key material ``from_env`` reads besides the config fields.
_KEY_ENV = (
    "SECRET",
    "SECRET_ALGORITHM",
    "SECRET_KID",
    "PUBLIC_KEY",
    "PUBLIC_KEY_ALGORITHM",
    "PUBLIC_KEY_KID",
    "JWKS",
)


def _key_set(  # noqa: PLR0912 - one branch per key form and per refusal
    keys: Sequence[Key] | None,
    jwks: Mapping[str, Any] | str | bytes | None,
    *,
    allow_symmetric: bool,
) -> tuple[_core.KeySet, tuple[tuple[str | None, str], ...]]:
    """The key set of keys given in code, and ``(kid, reason)`` of every key left out."""
    _check_flags(allow_symmetric=allow_symmetric)
    cores: list[_core.Key] = []
    if keys is not None:
        if isinstance(keys, Key):
            keys = [keys]
        for key in keys:
            if not isinstance(key, Key):
                raise ConfigurationError("keys must be Key objects (Key.secret, Key.pem, Key.jwk)")
            cores.append(key._inner)
    try:
        if jwks is not None:
            document = _core.KeySet.from_jwks(
                json_text(jwks, "JWKS"), allow_symmetric=bool(allow_symmetric)
            )
            for kid, code, reason in document.skipped:
                logger.warning(
                    "JWKS key %r skipped: %s",
                    kid,
                    reason,
                    extra={
                        "jwt_event": "keys.key_skipped",
                        "jwt_kid": kid,
                        "jwt_code": code,
                        "jwt_reason": reason,
                    },
                )
            note_padded(document.keys, "JWKS")
            reported = [(kid, reason) for kid, _, reason in document.skipped]
            if not cores:
                return document, tuple(reported)
            # Every JWKS key, conflicting ones included: combined with keys=,
            # a kid naming two different keys stays unusable (design.md §3).
            cores.extend(document.keys)
        else:
            reported = []
        if not cores:
            raise ConfigurationError("no keys: pass keys=[...] or jwks=...")
        combined = _core.KeySet(cores)
    except _core.CoreError as exc:
        _core.raise_translated(exc)
    for kid, code, reason in combined.skipped:
        if code == _EXPOSED:
            # Keys given in code: refused at build (a fetched JWKS holds no
            # secret; one given with allow_symmetric=True is refused too).
            raise WeakKeyError(f"key {kid!r}: {reason}")
        if (kid, reason) not in reported:
            logger.warning("key %r skipped: %s", kid, reason)
            reported.append((kid, reason))
    return combined, tuple(reported)


#: The core's code for a secret that is the text of a public member of a key
#: beside it (issue 33, D5): anyone holding that public key could forge tokens.
_EXPOSED = "exposed-secret"


def _allowed(config: JWTConfig) -> tuple[str, ...]:
    """The algorithms a token can verify with (what telemetry may name)."""
    return tuple(config.algorithms or _core.algorithms())
