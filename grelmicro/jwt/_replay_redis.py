"""One DPoP replay store for a whole fleet, in Redis (or Valkey).

With the in-process :class:`~grelmicro.jwt.ReplayStore`, each worker of
each replica remembers only the proofs it saw: N workers accept a captured
proof up to N times. :class:`RedisReplayStore` keeps the memory in one Redis
server that every worker shares, so a proof is accepted once per fleet.

One round trip per proof: a server-side script (``EVALSHA``; redis-py loads
it again after a ``SCRIPT FLUSH`` or a restart) that, atomically,

1. forgets entries whose deadline has passed (sorted sets scored by deadline);
2. answers "replay" when the proof's replay key is there;
3. applies the same rules as the in-process store: refused when the store
   holds ``max_size`` live entries (``store_full``), or when the proof's
   client key holds ``max_per_key`` entries or its fair share (fewer than
   the free room divided by the client keys holding entries, itself
   included: ``over_quota``), each with the time until room frees;
4. otherwise records the entry until its deadline.

Every key of one store shares one hash tag (``{prefix}``), so the script's
keys live in one slot: the store works on a Redis Cluster (on the node that
owns the slot) and behind Sentinel (pass the master's client). The keys
expire by themselves a minute after their last deadline (a relative TTL, so
the Redis server's clock does not matter), so an idle store leaves nothing.
The deadlines are the apps' clocks: keep the workers' clocks in sync (NTP),
as DPoP's ``iat`` window needs anyway.

When Redis cannot be reached or answers an error, the proof is refused
(:class:`~grelmicro.jwt.DPoPReplayError` with ``unavailable``, answered 503
with ``Retry-After``): it could be a replay, and nothing says it is not.
Passing ``fallback=ReplayStore()`` opts out explicitly: while Redis is down
each process remembers proofs on its own (a captured proof may be accepted
once per process again), and the switch is logged both ways.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from grelmicro.jwt._dpop import ReplayBackend, check_sizes
from grelmicro.jwt.errors import ConfigurationError, DPoPReplayError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["RedisReplayStore"]

logger = logging.getLogger("grelmicro.jwt")

#: KEYS: the store's entries, its client keys, this client key's entries (sorted
#: sets scored by deadline, in milliseconds). ARGV: replay key, client key, now,
#: deadline, max_size, max_per_key, expiry margin. Answers {1} recorded, {0}
#: replay, {-1, oldest deadline} full, {-2, the key's oldest deadline} over its share.
_SCRIPT = """
local seen, owners, mine = KEYS[1], KEYS[2], KEYS[3]
local member, owner = ARGV[1], ARGV[2]
local now, deadline = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_size, max_per_key = tonumber(ARGV[5]), tonumber(ARGV[6])
local margin = tonumber(ARGV[7])
local past = '(' .. ARGV[3]
redis.call('ZREMRANGEBYSCORE', seen, '-inf', past)
redis.call('ZREMRANGEBYSCORE', owners, '-inf', past)
redis.call('ZREMRANGEBYSCORE', mine, '-inf', past)
if redis.call('ZSCORE', seen, member) then
  return {0}
end
local free = max_size - redis.call('ZCARD', seen)
if free <= 0 then
  local oldest = redis.call('ZRANGE', seen, 0, 0, 'WITHSCORES')
  return {-1, oldest[2] or ARGV[3]}
end
local live = redis.call('ZCARD', mine)
local keys = redis.call('ZCARD', owners)
if live == 0 then
  keys = keys + 1
end
if live >= max_per_key or live * keys >= free then
  local oldest = redis.call('ZRANGE', mine, 0, 0, 'WITHSCORES')
  return {-2, oldest[2] or ARGV[3]}
end
redis.call('ZADD', seen, deadline, member)
redis.call('ZADD', mine, deadline, member)
local held = redis.call('ZSCORE', owners, owner)
if not held or tonumber(held) < deadline then
  redis.call('ZADD', owners, deadline, owner)
end
local ttl = deadline - now + margin
for _, key in ipairs(KEYS) do
  local left = redis.call('PTTL', key)
  if left < 0 or left < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end
return {1}
"""

#: Keys outlive their last deadline by this much (milliseconds).
_MARGIN_MS = 60_000


def _refusal(message: str, **flags: Any) -> DPoPReplayError:
    error = DPoPReplayError(message)
    for name, value in flags.items():
        setattr(error, name, value)
    return error


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds")
    return float(value)


class RedisReplayStore:
    """A DPoP replay store shared by every process, in Redis (5.0 or later) or Valkey.

    Plug it into every worker's :class:`~grelmicro.jwt.DPoPVerifier`
    (``replay_store=``): a proof is then accepted once per fleet. Each proof
    costs one round trip (a server-side script; see the module
    documentation). The async FastAPI path awaits it on the event loop
    (``redis.asyncio``); :meth:`record` is the blocking call for sync code.

    Args:
        url: the server, ``redis://host:6379/0`` (``rediss://`` for TLS,
            ``unix://`` for a socket). Or give ``client`` (and
            ``async_client``) built yourself, e.g. from a Sentinel.
        client: a ``redis.Redis`` (or ``RedisCluster``) for :meth:`record`.
        async_client: a ``redis.asyncio.Redis`` for :meth:`record_async`;
            without one (and without ``url``) the async path calls
            :meth:`record` in a worker thread.
        prefix: the keys' hash tag: ``{prefix}:seen``, ``{prefix}:owners``,
            ``{prefix}:key:<thumbprint>``. One per fleet that shares proofs.
        max_size: live entries the store holds at most (about 300 bytes each
            in Redis: some 160 MB when full at the default).
        max_per_key: live entries one client key holds at most (default
            ``max_size // 128``); a key's fair share may be lower.
        timeout: seconds to connect and to wait for an answer, each.
        max_connections: the connection pool's size, per process (and per
            event loop for the async client).
        fallback: ``None`` (the default) refuses every DPoP proof while Redis
            cannot be reached (503). A store (``ReplayStore()``) records in it
            instead: an explicit opt-out of fleet-wide replay protection
            while Redis is down.
        retry_after: the ``Retry-After`` of a refusal while Redis is down.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        async_client: Any = None,
        prefix: str = "grelmicro:dpop",
        max_size: int = 524_288,
        max_per_key: int | None = None,
        timeout: float = 0.25,
        max_connections: int = 64,
        fallback: ReplayBackend | None = None,
        retry_after: float = 1.0,
    ) -> None:
        if (url is None) == (client is None):
            raise ConfigurationError("give RedisReplayStore a url or a client (one of them)")
        if url is not None and not isinstance(url, str):
            raise ConfigurationError("url must be a Redis URL such as 'redis://localhost:6379/0'")
        if async_client is not None and client is None:
            raise ConfigurationError("async_client needs client (the sync one) too")
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "{} \t\r\n"):
            raise ConfigurationError("prefix must be a non-empty name without braces or spaces")
        self.max_size, self.max_per_key = check_sizes(max_size, max_per_key)
        self.timeout = _number(timeout, "timeout")
        self.retry_after = _number(retry_after, "retry_after")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int):
            raise ConfigurationError("max_connections must be a whole number, 1 or more")
        if max_connections < 1:
            raise ConfigurationError("max_connections must be a whole number, 1 or more")
        if fallback is not None and not isinstance(fallback, ReplayBackend):
            raise ConfigurationError("fallback must be a ReplayBackend (ReplayStore()) or None")
        try:
            import redis  # noqa: PLC0415 - an optional extra
            import redis.asyncio  # noqa: PLC0415
        except ImportError:
            raise ConfigurationError(
                "RedisReplayStore needs the redis package: pip install 'grelmicro[redis]'"
            ) from None
        self._redis = redis
        self.prefix = prefix
        self.fallback = fallback
        self._url = url
        self._max_connections = max_connections
        self._seen = f"{{{prefix}}}:seen"
        self._owners = f"{{{prefix}}}:owners"
        self._client = client if client is not None else self._sync_client()
        self._script = self._client.register_script(_SCRIPT)
        self._async_given = async_client
        self._async: tuple[Any, Any, Any] | None = None  # (loop, client, script)
        self._lock = threading.Lock()
        self._down = False

    def __repr__(self) -> str:
        return f"RedisReplayStore(prefix={self.prefix!r}, max_size={self.max_size})"

    # -- clients ---------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        from redis.backoff import NoBackoff  # noqa: PLC0415
        from redis.retry import Retry  # noqa: PLC0415

        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "max_connections": self._max_connections,
            # One retry: a pooled connection that a restarted server closed.
            "retry": Retry(NoBackoff(), 1),
        }

    def _sync_client(self) -> Any:
        assert self._url is not None  # noqa: S101 - only called with a url
        try:
            return self._redis.Redis.from_url(self._url, **self._options())
        except ValueError:
            raise ConfigurationError(
                "url must be a Redis URL such as 'redis://localhost:6379/0'"
            ) from None

    def _async_script(self) -> Any:
        """The script on an asyncio client of the running loop (made once per loop)."""
        loop = asyncio.get_running_loop()
        current = self._async
        if current is not None and current[0] is loop:
            return current[2]
        with self._lock:
            if self._async_given is not None:
                client = self._async_given
            else:
                from redis.asyncio.retry import Retry  # noqa: PLC0415
                from redis.backoff import NoBackoff  # noqa: PLC0415

                assert self._url is not None  # noqa: S101 - checked by record_async
                client = self._redis.asyncio.Redis.from_url(
                    self._url, **{**self._options(), "retry": Retry(NoBackoff(), 1)}
                )
            script = client.register_script(_SCRIPT)
            self._async = (loop, client, script)
        return script

    # -- the ReplayBackend ---------------------------------------------------

    def _arguments(
        self, key: bytes, owner: str, now: float, until: float
    ) -> tuple[Sequence[str], Sequence[Any]]:
        keys = (self._seen, self._owners, f"{{{self.prefix}}}:key:{owner}")
        args = (
            key,
            owner,
            int(now * 1000),
            int(until * 1000),
            self.max_size,
            self.max_per_key,
            _MARGIN_MS,
        )
        return keys, args

    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        """Remember ``key`` in Redis until ``until``; ``False`` for a replay.

        Raises:
            DPoPReplayError: ``store_full``, ``over_quota`` (with
                ``retry_after``), or ``unavailable`` when Redis cannot be
                reached and there is no ``fallback``.
        """
        keys, args = self._arguments(key, owner, now, until)
        try:
            answer = self._script(keys=keys, args=args)
        except self._redis.RedisError as exc:
            return self._when_down(exc, key, owner, now, until)
        return self._answer(answer, now)

    async def record_async(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        """:meth:`record` for async code: the round trip does not block the event loop."""
        if self._url is None and self._async_given is None:
            return await asyncio.to_thread(self.record, key, owner, now=now, until=until)
        keys, args = self._arguments(key, owner, now, until)
        try:
            answer = await self._async_script()(keys=keys, args=args)
        except self._redis.RedisError as exc:
            return self._when_down(exc, key, owner, now, until)
        return self._answer(answer, now)

    def _answer(self, answer: Any, now: float) -> bool:
        if self._down:
            self._down = False
            logger.info(
                "DPoP replay store %s reachable again", self.prefix,
                extra={"jwt_event": "dpop.replay_store.up"},
            )  # fmt: skip
        status = int(answer[0])
        if status >= 0:
            return status == 1
        seconds = max(0.0, float(answer[1]) / 1000 - now)
        if status == -1:
            raise _refusal(
                "the DPoP replay store is full; the proof cannot be recorded",
                store_full=True,
                retry_after=seconds,
            )
        raise _refusal(
            "the DPoP proof's key holds its share of live proofs; slow down",
            over_quota=True,
            retry_after=seconds,
        )

    def _when_down(self, exc: Exception, key: bytes, owner: str, now: float, until: float) -> bool:
        if not self._down:
            self._down = True
            logger.warning(
                "DPoP replay store %s cannot be reached (%s): %s",
                self.prefix,
                type(exc).__name__,
                "proofs are recorded in this process only"
                if self.fallback is not None
                else "DPoP requests are refused (503) until it answers",
                extra={"jwt_event": "dpop.replay_store.down"},
            )
        if self.fallback is not None:
            return bool(self.fallback.record(key, owner, now=now, until=until))
        raise _refusal(
            "the DPoP replay store cannot be reached; the proof cannot be checked",
            unavailable=True,
            retry_after=self.retry_after,
        )

    def close(self) -> None:
        """Close the sync client's connections (the async ones close with their loop)."""
        self._client.close()
