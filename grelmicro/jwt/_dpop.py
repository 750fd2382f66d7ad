"""Sender-constrained tokens: DPoP proofs (RFC 9449).

A DPoP-bound access token names a key in its ``cnf.jkt`` claim (the RFC 7638
thumbprint of a public key); every request that presents it must carry a
fresh proof, signed by that key, for that request. :class:`DPoPVerifier`
holds the policy and the state a proof check needs beyond the compiled core:

- the core checks the proof itself in one call (``typ``, algorithm, the
  ``jwk`` header key, signature, ``htm``, ``htu``, ``iat`` window, ``ath``,
  thumbprint against ``cnf.jkt``); see ``grelmicro-core/src/dpop/``;
- :class:`ReplayStore` refuses a proof seen before;
- :class:`DPoPNonces` issues server nonces (``DPoP-Nonce``) and rotates them;
- the binding rules: a bound token is never accepted as a plain bearer token,
  an unbound token never with the ``DPoP`` scheme, and the mode says which
  schemes the service takes (``required``, ``accepted`` or ``off``).

The replay store, and why it is built this way
----------------------------------------------

A proof may be accepted for ``max_age + 2 * leeway`` seconds after it is
first seen (``iat`` up to ``leeway`` ahead of the clock, then ``max_age +
leeway`` behind it). Its entry lives exactly that long, so a replay inside
the window always finds it; after it the core refuses the proof by its
``iat`` anyway.

The verifier talks to its store through :class:`ReplayBackend`, one method:
record this replay key for this client key until then, and say whether it
was new. :class:`ReplayStore` is the in-process default;
:class:`~grelmicro.jwt.RedisReplayStore` is the one a fleet shares (one
round trip per proof, the same rules, fail closed when Redis is down).

- Entries are a 32-byte digest (SHA-256 over the key thumbprint and the
  ``jti``, computed by the core): fixed size, no proof text kept, and one
  client's ``jti`` cannot collide with another's.
- Fairness (the fair-share rule): a client key (thumbprint) may record a
  proof only while it holds fewer live entries than the store's free room
  divided by the number of client keys holding entries (itself included),
  and never more than ``max_per_key`` (1/128 of the store by default). A
  key over its share is refused alone (:class:`DPoPReplayError` with
  ``over_quota``, answered 429); a key with no entry is always let in while
  the store has room, so only about as many keys as the store has entries
  can fill it (each with its own valid access token bound to it), and only
  then is a new proof refused (``store_full``, answered 503). Whatever a set
  of keys does, its entries expire within one window and their shares then
  leave room for the rest. Both refusals carry ``retry_after``: the time
  until the key's own oldest entry expires, or the store's oldest.
- The store is split into shards by key thumbprint (``hash()`` is salted
  per process), each a ``dict`` plus a ``deque`` in insertion order and a
  live count per client key, behind its own small lock (a check-and-insert
  must be atomic, or two threads could both accept one replayed proof; a
  key's count lives in one shard, so its quota is exact). The lock is held
  for a dict lookup and an insert, after a signature check that costs a
  hundred times more: with 8 shards, 12 threads rarely meet. The size of the
  whole store is one integer behind a second lock, held for an addition.
- Eviction drains only expired entries, from the front of a shard's deque
  (the window is constant, so the front holds the oldest deadline). A live
  entry is **never** evicted: evicting one would let its proof be replayed.
  A shard drains itself on every insert; when the store looks full, every
  shard is drained before a proof is refused, so expired entries never
  count. Size never exceeds the bound.
- A proof reaches the store only after the core accepted it: a valid access
  token, a signature by the key that token is bound to, the right method,
  URI and time. An attacker without a token of their own cannot add a
  single entry.
- Nothing iterates the dict; every operation is O(1), amortised (draining
  every shard happens only when the store is full). An entry costs about
  160 bytes (the digest, a dict slot, a float, two deque slots); a client
  key with live entries about 100 more.

Size the store for the peak rate of proofs times the window, twice over
when many keys are busy at once: with k keys each holding h entries, the
shares stop them at h < max_size / (2k), so busy keys share half the store
and the other half stays free for newcomers. The default, 131,072 entries
(about 20 MB when full) over a 70 s window, holds ~1,870 proofs/s from keys
sending one proof a window, ~935 proofs/s when every key is busy, and ~14
proofs/s (1,024 live) from any one key. A service with a few very busy
clients raises ``max_per_key``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import threading
import time
from base64 import urlsafe_b64encode
from collections import deque
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypedDict, runtime_checkable

from grelmicro.jwt import _core
from grelmicro.jwt._calls import run_async, run_sync
from grelmicro.jwt._confirmation import JKT, confirmation
from grelmicro.jwt.errors import (
    BindingError,
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
    InvalidKeyError,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DPoPMode",
    "DPoPNonces",
    "DPoPVerifier",
    "ReplayBackend",
    "ReplayStore",
    "jwk_thumbprint",
]

DPoPMode = Literal["required", "accepted", "off"]
"""Which schemes a service takes: ``DPoP`` only, ``DPoP`` or ``Bearer``, ``Bearer`` only."""

_MODES = ("required", "accepted", "off")


class _Presented(TypedDict):
    scheme: str
    access_token: str | bytes
    claims: Mapping[str, Any]
    proof: str | bytes | None
    method: str
    uri: str


class DPoPRequest(_Presented, total=False):
    """What :meth:`DPoPVerifier.check` reads of a request (see its arguments)."""

    now: float | None


class Record(NamedTuple):
    """The replay-store call a proof check needs made (see :meth:`ReplayBackend.record`)."""

    key: bytes
    owner: str
    now: float
    until: float


#: A proof check as steps: yield the :class:`Record` to make, get the store's answer back.
DPoPSteps = Generator[Record, object, None]


def _number(value: object, name: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number of seconds")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "over" if positive else "at least"
        raise ConfigurationError(f"{name} must be a finite number of seconds, {bound} 0")
    return number


@runtime_checkable
class ReplayBackend(Protocol):
    """Where a :class:`DPoPVerifier` remembers the proofs it accepted.

    :class:`ReplayStore` is the in-process one (the default);
    :class:`~grelmicro.jwt.RedisReplayStore` shares the memory between
    processes (with one store per process, each of N workers accepts a
    captured proof once). An async app's path also uses an optional
    ``async def record_async(key, owner, *, now, until) -> bool`` when the
    store has one.
    """

    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        """Remember ``key`` until ``until``; ``False`` if it is remembered already.

        Args:
            key: the proof's replay key (32 bytes: SHA-256 over the key
                thumbprint and the ``jti``).
            owner: the thumbprint of the key that signed the proof (for
                per-client quotas).
            now: the time of the check, seconds since the epoch.
            until: when the entry may be forgotten (the proof is refused by
                its ``iat`` after that).

        Returns:
            ``True`` when ``key`` was new and is now remembered; ``False``
            (or anything false) for a replay.

        Raises:
            DPoPReplayError: the proof cannot be recorded (``store_full``,
                ``over_quota``, ``unavailable``; with ``retry_after`` when
                known); any other exception refuses the request too.
        """
        ...


class _Owner:
    """A client key's live entries in its shard: their deadlines, oldest first."""

    __slots__ = ("deadlines", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.deadlines: deque[float] = deque()


class _Shard:
    __slots__ = ("entries", "holders", "lock", "order", "owners")

    def __init__(self) -> None:
        self.entries: dict[bytes, float] = {}  # replay key -> deadline
        self.order: deque[bytes] = deque()  # the keys of `entries`, oldest first
        self.holders: deque[_Owner] = deque()  # the owner of each key in `order`
        self.owners: dict[str, _Owner] = {}  # client keys with live entries
        self.lock = threading.Lock()

    def drain(self, now: float) -> tuple[int, int]:
        """Forget the expired entries at the front; how many, and how many owners left.

        Call under the lock.
        """
        entries, order, holders = self.entries, self.order, self.holders
        drained = gone = 0
        # An entry lives through its deadline (the core still accepts a
        # proof at the window's edge), and is drained only after it.
        while order and entries[order[0]] < now:
            del entries[order.popleft()]
            holder = holders.popleft()
            holder.deadlines.popleft()
            if not holder.deadlines:
                del self.owners[holder.name]
                gone += 1
            drained += 1
        return drained, gone

    def earliest(self) -> float | None:
        """The deadline of the oldest entry, ``None`` when empty. Call under the lock."""
        return self.entries[self.order[0]] if self.order else None


def _refusal(
    message: str,
    *,
    store_full: bool = False,
    over_quota: bool = False,
    retry_after: float | None = None,
) -> DPoPReplayError:
    error = DPoPReplayError(message)
    error.store_full = store_full
    error.over_quota = over_quota
    error.retry_after = retry_after
    return error


class ReplayStore:
    """A bounded in-process memory of accepted DPoP proofs (their replay keys).

    ``record`` says whether a key is new. A live entry is never evicted, so
    the store refuses instead, by two rules:

    - **fair share** (``over_quota``, answered 429): a client key may record
      a proof only while it holds fewer live entries than the store's free
      room divided by the number of client keys holding entries (itself
      included), and never more than ``max_per_key``. A key seen for the
      first time is always let in while the store has room; to fill the
      store, clients need about as many keys as the store has entries.
    - **full** (``store_full``, answered 503): no room at all.

    Each refusal carries ``retry_after``: the seconds until the key's own
    oldest entry expires (over its share), or until the oldest entry of the
    store does (full). See the module documentation for the design.

    Args:
        max_size: live entries the store holds at most (about 160 bytes each).
        max_per_key: live entries one client key holds at most, whatever
            room is left (default: ``max_size // 128``, at least 1).
        shards: lock stripes, a power of two.
    """

    __slots__ = (
        "_keys",
        "_mask",
        "_shards",
        "_size",
        "_size_lock",
        "max_per_key",
        "max_size",
    )

    def __init__(
        self, max_size: int = 131_072, *, max_per_key: int | None = None, shards: int = 8
    ) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ConfigurationError("shards must be a whole number, 1 or more")
        if shards & (shards - 1):
            raise ConfigurationError("shards must be a power of two")
        self.max_size, self.max_per_key = check_sizes(max_size, max_per_key)
        self._mask = shards - 1
        self._shards = tuple(_Shard() for _ in range(shards))
        self._size = 0
        self._keys = 0  # client keys holding live entries
        self._size_lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> int:
        """Client keys holding live entries (expired ones count until drained)."""
        return self._keys

    def shard_lengths(self) -> list[int]:
        """Entries per shard (for tests and metrics)."""
        return [len(shard.entries) for shard in self._shards]

    def live_for(self, owner: str) -> int:
        """Entries held for the client key ``owner`` (for tests and metrics).

        Expired entries count until their shard drains them (on its next use).
        """
        shard = self._shards[hash(owner) & self._mask]
        with shard.lock:
            holder = shard.owners.get(owner)
            return 0 if holder is None else len(holder.deadlines)

    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        """Remember ``key`` (of a proof by the key ``owner``) until ``until``.

        Returns:
            ``True`` if ``key`` is new, ``False`` if it is remembered already
            (a replay).

        Raises:
            DPoPReplayError: ``owner`` holds its share of live entries
                already (``over_quota``), or the store holds ``max_size``
                (``store_full``); ``retry_after`` says when room frees.
        """
        shard = self._shards[hash(owner) & self._mask]
        recorded = self._insert(shard, key, owner, now, until)
        if recorded is None:
            # Other shards may still count expired entries (a shard drains
            # itself when it is used): drain them all before refusing.
            self._drain_all(now)
            recorded = self._insert(shard, key, owner, now, until)
            if recorded is None:
                raise _refusal(
                    "the DPoP replay store is full; the proof cannot be recorded",
                    store_full=True,
                    retry_after=self._earliest(now),
                )
        return recorded

    def _drain_all(self, now: float) -> None:
        for other in self._shards:
            with other.lock:
                drained, gone = other.drain(now)
                if drained:
                    with self._size_lock:
                        self._size -= drained
                        self._keys -= gone

    def _earliest(self, now: float) -> float:
        """Seconds until the oldest live entry of the store expires."""
        deadlines = []
        for shard in self._shards:
            with shard.lock:
                earliest = shard.earliest()
            if earliest is not None:
                deadlines.append(earliest)
        return max(0.0, min(deadlines, default=now) - now)

    def _insert(
        self, shard: _Shard, key: bytes, owner: str, now: float, until: float
    ) -> bool | None:
        """``record`` in one shard; ``None`` when the whole store has no room."""
        with shard.lock:
            drained, gone = shard.drain(now)
            holder = shard.owners.get(owner)
            live = 0 if holder is None else len(holder.deadlines)
            replayed = key in shard.entries
            # One view of the store's size and keys for the whole decision.
            with self._size_lock:
                size = self._size - drained
                keys = self._keys - gone
                free = self.max_size - size
                share = live >= self.max_per_key or live * (keys + (holder is None)) >= free
                accepted = free > 0 and not replayed and not share
                if accepted:
                    size += 1
                    keys += holder is None
                self._size, self._keys = size, keys
            if replayed:
                return False
            if free <= 0:
                return None  # a full store answers before a share: it refuses everyone
            if not accepted:
                assert holder is not None  # noqa: S101 - a key with no entry is over no share
                raise _refusal(
                    "the DPoP proof's key holds its share of live proofs; slow down",
                    over_quota=True,
                    retry_after=max(0.0, holder.deadlines[0] - now),
                )
            if holder is None:
                holder = shard.owners[owner] = _Owner(owner)
            holder.deadlines.append(until)
            shard.entries[key] = until
            shard.order.append(key)
            shard.holders.append(holder)
            return True

    def clear(self) -> None:
        """Forget every proof."""
        for shard in self._shards:
            with shard.lock:
                count, owners = len(shard.entries), len(shard.owners)
                shard.entries.clear()
                shard.order.clear()
                shard.holders.clear()
                shard.owners.clear()
                with self._size_lock:
                    self._size -= count
                    self._keys -= owners


def check_sizes(max_size: object, max_per_key: object) -> tuple[int, int]:
    """``max_size`` and ``max_per_key`` (default ``max_size // 128``) checked."""
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ConfigurationError("max_size must be a whole number of entries, 1 or more")
    if max_per_key is None:
        max_per_key = max(1, max_size // 128)
    if (
        isinstance(max_per_key, bool)
        or not isinstance(max_per_key, int)
        or not 1 <= max_per_key <= max_size
    ):
        raise ConfigurationError("max_per_key must be a whole number from 1 to max_size")
    return max_size, max_per_key


class DPoPNonces:
    """Server-issued DPoP nonces (RFC 9449 §8), rotated every ``lifetime`` seconds.

    A nonce is an HMAC of the current period under a secret, so it needs no
    state and several processes sharing ``secret`` issue and accept the same
    nonces. The current and the previous period's nonce are accepted (a
    client that just got one is not refused at the boundary).

    Args:
        lifetime: seconds between rotations.
        secret: the HMAC key, 32 bytes or more (default: random per process).
        clock: seconds since the epoch (``time.time``).
    """

    __slots__ = ("_cached", "_clock", "_secret", "lifetime")

    def __init__(
        self,
        *,
        lifetime: float = 300.0,
        secret: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lifetime = _number(lifetime, "lifetime", positive=True)
        if secret is None:
            secret = secrets.token_bytes(32)
        if not isinstance(secret, bytes) or len(secret) < 32:
            raise ConfigurationError("the nonce secret must be bytes, at least 32 of them")
        self._secret = secret
        self._clock = clock
        self._cached: tuple[int, str, str] = (-1, "", "")

    def _period(self, now: float) -> int:
        return int(now // self.lifetime)

    def _nonce(self, period: int) -> str:
        mac = hmac.new(self._secret, period.to_bytes(8, "big", signed=True), hashlib.sha256)
        return urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")

    def _pair(self, now: float) -> tuple[int, str, str]:
        period = self._period(now)
        cached = self._cached  # one read: a tuple swapped whole, no lock needed
        if cached[0] != period:
            cached = (period, self._nonce(period), self._nonce(period - 1))
            self._cached = cached
        return cached

    def current(self, now: float | None = None) -> str:
        """The nonce to send in ``DPoP-Nonce`` now."""
        return self._pair(self._clock() if now is None else now)[1]

    def accepts(self, nonce: str | None, now: float | None = None) -> bool:
        """Whether ``nonce`` is this or the previous period's nonce."""
        if not isinstance(nonce, str):
            return False
        _, current, previous = self._pair(self._clock() if now is None else now)
        given = nonce.encode("ascii", "replace")
        return hmac.compare_digest(given, current.encode()) or hmac.compare_digest(
            given, previous.encode()
        )


class DPoPVerifier:
    """The DPoP policy of a resource server (RFC 9449 §7).

    Build one at startup and call :meth:`check` for every request once its
    access token has verified (the FastAPI glue does both).

    Args:
        mode: ``"required"`` (only ``DPoP`` tokens), ``"accepted"`` (``DPoP``
            and unbound ``Bearer`` tokens) or ``"off"`` (``Bearer`` only; a
            bound token is still refused as a bearer token).
        algorithms: algorithms proofs may use (default: every public-key
            algorithm but ML-DSA, allowed only when named; HMAC is never
            allowed).
        max_age: seconds a proof is accepted after its ``iat``.
        leeway: clock leeway, on both sides of the window.
        replay_store: where accepted proofs are remembered, a
            :class:`ReplayBackend` (default: a :class:`ReplayStore` of
            131,072 entries, 1,024 per client key; share one between the
            verifiers of a process, or plug in one shared between processes).
        nonces: server nonces: ``True`` for a :class:`DPoPNonces` with the
            defaults, or one you built (shared secret, lifetime).
        max_proof_size: the largest proof accepted, in bytes.
        clock: seconds since the epoch (``time.time``).
    """

    __slots__ = ("_clock", "_core", "_window", "mode", "nonces", "replay_store")

    def __init__(
        self,
        mode: DPoPMode = "accepted",
        *,
        algorithms: Sequence[str] | None = None,
        max_age: float = 60.0,
        leeway: float = 5.0,
        replay_store: ReplayBackend | None = None,
        nonces: DPoPNonces | bool = False,
        max_proof_size: int = 8192,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if mode not in _MODES:
            raise ConfigurationError("mode must be 'required', 'accepted' or 'off'")
        if isinstance(algorithms, str):
            algorithms = [algorithms]
        if algorithms is not None and not all(isinstance(name, str) for name in algorithms):
            raise ConfigurationError("algorithms must be algorithm names such as 'ES256'")
        max_age = _number(max_age, "max_age", positive=True)
        leeway = _number(leeway, "leeway", positive=False)
        if (
            isinstance(max_proof_size, bool)
            or not isinstance(max_proof_size, int)
            or max_proof_size < 1
        ):
            raise ConfigurationError("max_proof_size must be a positive number of bytes")
        try:
            self._core = _core.ProofVerifier(
                algorithms=None if algorithms is None else list(algorithms),
                max_age=max_age,
                leeway=leeway,
                max_size=max_proof_size,
            )
        except _core.CoreError as exc:
            _core.raise_translated(exc)
        self.mode: DPoPMode = mode
        if replay_store is not None and not isinstance(replay_store, ReplayBackend):
            raise ConfigurationError("replay_store must have a record() method (a ReplayBackend)")
        self.replay_store: ReplayBackend = ReplayStore() if replay_store is None else replay_store
        if nonces is True:
            nonces = DPoPNonces(clock=clock)
        if nonces is not False and not isinstance(nonces, DPoPNonces):
            raise ConfigurationError("nonces must be True, False or a DPoPNonces")
        if not callable(clock):
            raise ConfigurationError("clock must be a callable returning seconds")
        self.nonces: DPoPNonces | None = nonces or None
        self._window = max_age + 2 * leeway
        self._clock = clock

    def __repr__(self) -> str:
        return f"DPoPVerifier({self.mode!r}, algorithms={self.algorithms!r})"

    @property
    def algorithms(self) -> list[str]:
        """Algorithms proofs may be signed with (for ``algs=`` in the challenge)."""
        return self._core.algorithms

    @property
    def window(self) -> float:
        """Seconds a proof stays remembered: ``max_age + 2 * leeway``."""
        return self._window

    def check(self, **request: Unpack[DPoPRequest]) -> None:
        """Apply the DPoP rules to a request whose access token verified.

        The request is given by keyword: ``scheme`` (the ``Authorization``
        scheme, ``"Bearer"`` or ``"DPoP"``, any case), ``access_token`` (the
        token as sent: ``ath`` is its hash), ``claims`` (the token's verified
        claims: ``cnf.jkt`` is read), ``proof`` (the ``DPoP`` header, or
        ``None`` when absent), ``method`` (``htm``), ``uri`` (the request URI
        as the client addressed it: ``htu``; query and fragment are ignored)
        and optionally ``now`` (seconds since the epoch; default: the clock).

        Raises:
            DPoPBindingError: the token and the scheme do not fit.
            DPoPProofError: the proof is missing or refused (``check`` says
                which rule; ``use_nonce`` asks for a retry with a nonce).
            DPoPReplayError: the proof was used before, or cannot be recorded
                (``over_quota``: its key holds its share of live proofs;
                ``store_full``: the store does; ``unavailable``: a shared
                store cannot be reached).
        """
        run_sync(self._steps(**request), self._record)

    async def check_async(self, **request: Unpack[DPoPRequest]) -> None:
        """:meth:`check`, awaiting the replay store when it has ``record_async``.

        A shared store (:class:`~grelmicro.jwt.RedisReplayStore`) answers an
        async app without blocking its event loop for the round trip.
        """
        await run_async(self._steps(**request), self._record_async)

    def _steps(
        self,
        *,
        scheme: str,
        access_token: str | bytes,
        claims: Mapping[str, Any],
        proof: str | bytes | None,
        method: str,
        uri: str,
        now: float | None = None,
    ) -> DPoPSteps:
        """The check as steps: every rule, then the :class:`Record` to make (its answer sent back).

        A bearer token where bearer tokens are accepted ends without one.
        :meth:`check` and :meth:`check_async` drive them.
        """
        jkt = _bound_key(claims)
        if scheme.lower() != "dpop":
            if self.mode == "required":
                raise _binding("scheme", "this service accepts DPoP-bound tokens only")
            if jkt is not None:
                raise _binding(
                    "bearer", "the access token is DPoP-bound and cannot be used as a bearer token"
                )
            return
        if self.mode == "off":
            raise _binding("scheme", "this service does not accept DPoP tokens")
        if jkt is None:
            raise _binding("unbound", "the access token is not DPoP-bound (no cnf.jkt)")
        if proof is None:
            error = DPoPProofError("the request carries no DPoP proof")
            error.check = "missing"
            raise error
        when = self._clock() if now is None else now
        try:
            replay_key, _iat, nonce = self._core.verify(proof, method, uri, access_token, jkt, when)
        except _core.CoreError as exc:
            refusal = _core.translate(exc)
            check = (exc.context or {}).get("check")
            if not isinstance(refusal, (DPoPProofError, DPoPBindingError)):
                # The proof could not even be read (text that is not Unicode).
                refusal, check = DPoPProofError(f"DPoP proof: {refusal}"), "structure"
            refusal.check = check if isinstance(check, str) else None
            raise refusal from None
        except (TypeError, OverflowError):
            error = DPoPProofError("the time to check the proof against is not a number")
            error.check = "iat"
            raise error from None
        if self.nonces is not None and not self.nonces.accepts(nonce, when):
            error = DPoPProofError(
                "the DPoP proof lacks the server's current nonce"
                if nonce is None
                else "the DPoP proof's nonce is not current"
            )
            error.check = "nonce"
            error.use_nonce = True
            raise error
        recorded = yield Record(replay_key, jkt, when, when + self._window)
        if not recorded:
            raise DPoPReplayError("the DPoP proof was used before (replayed jti)")

    def _record(self, call: Record) -> object:
        """Make ``call`` on the replay store; its answer (false: a replay)."""
        return self.replay_store.record(call.key, call.owner, now=call.now, until=call.until)

    async def _record_async(self, call: Record) -> object:
        """:meth:`_record`, awaiting the store's ``record_async`` when it has one."""
        record_async = getattr(self.replay_store, "record_async", None)
        if record_async is None:
            return self._record(call)
        return await record_async(call.key, call.owner, now=call.now, until=call.until)


def _bound_key(claims: Mapping[str, Any]) -> str | None:
    """The ``cnf.jkt`` of verified claims (read by :func:`confirmation`), ``None`` if absent.

    A ``cnf`` that cannot be read is a :class:`DPoPBindingError` here: the
    token cannot be matched to a proof key.
    """
    try:
        return confirmation(claims).jkt
    except BindingError as exc:
        raise _binding(JKT, exc.message) from None


def _binding(check: str, message: str) -> DPoPBindingError:
    error = DPoPBindingError(message)
    error.check = check
    return error


def jwk_thumbprint(jwk: Mapping[str, Any] | str | bytes) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (what ``cnf.jkt`` holds).

    Raises:
        InvalidKeyError: not an acceptable public JWK (private members, weak
            or unsupported key).
    """
    if isinstance(jwk, (str, bytes)):
        document = jwk
    else:
        try:
            document = json.dumps(dict(jwk))
        except (TypeError, ValueError):
            raise InvalidKeyError("a JWK must be a JSON object of strings") from None
    return _core.call(_core.jwk_thumbprint, document)
