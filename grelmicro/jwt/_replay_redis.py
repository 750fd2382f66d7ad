"""One DPoP replay store for a whole fleet, in Redis (or Valkey).

With the in-process :class:`~grelmicro.jwt.ReplayStore`, each worker of
each replica remembers only the proofs it saw: N workers accept a captured
proof up to N times. :class:`RedisReplayStore` keeps the memory in one Redis
server that every worker shares, so a proof is accepted once per fleet.

One round trip per proof: a server-side script (``EVALSHA``; loaded again
after a ``SCRIPT FLUSH`` or a restart) that, atomically,

1. reads the server's clock (``TIME``) and forgets entries whose deadline
   has passed by it (sorted sets scored by deadline);
2. answers "replay" when the proof's replay key is there;
3. applies the same rules as the in-process store: refused when the store
   holds ``max_size`` live entries (``store_full``), or when the proof's
   client key holds ``max_per_key`` entries or its fair share (fewer than
   the free room divided by the client keys holding entries, itself
   included: ``over_quota``), each with the time until room frees;
4. otherwise records the entry until the server's now plus the proof's
   remaining lifetime (as the worker computed it from its ``iat``).

One clock for the fleet: only the remaining lifetime crosses from the
worker, and the server dates, purges and expires entries by its own clock,
so a worker whose clock is off cannot erase the entries of the others
(issue 38, N30). The keys expire by themselves a minute after their last
deadline, so an idle store leaves nothing.

Every key of one store shares one hash tag (``{prefix}``), so the script's
keys live in one slot: the store works on a Redis Cluster (on the node that
owns the slot; give ``client=`` a ``redis.RedisCluster``) and behind
Sentinel (``client=`` the master's client from ``Sentinel.master_for``).

A burst is not an outage. The blocking path (:meth:`RedisReplayStore.record`)
takes a connection from a pool of ``max_connections`` and waits for one, up
to ``timeout``, when all are busy. The async path (``record_async``, what
the FastAPI dependency awaits) hands the proof to one I/O thread per store
and process, which sends every proof waiting as one pipeline on the sync
client: the event loop never holds a connection, and a congested loop does
not turn Redis's timely answer into a timeout (measured: issue 38 and
``bench/dpop_redis_bench.py``).

When Redis cannot be reached or answers an error, the proof is refused
(:class:`~grelmicro.jwt.DPoPReplayError` with ``unavailable``, answered 503
with ``Retry-After``): it could be a replay, and nothing says it is not.
Passing ``fallback=ReplayStore()`` opts out explicitly: while Redis is down
each process remembers proofs on its own (a captured proof may be accepted
once per process again), and the switch is logged both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import weakref
from typing import TYPE_CHECKING, Any

from grelmicro.jwt._dpop import ReplayBackend, check_sizes
from grelmicro.jwt._lifecycle import at_fork_child, at_stop, spawn
from grelmicro.jwt.errors import ConfigurationError, DPoPReplayError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["RedisReplayStore"]

logger = logging.getLogger("grelmicro.jwt")

#: KEYS: the store's entries, its client keys, this client key's entries (sorted
#: sets scored by deadline, in milliseconds of the *server's* clock). ARGV: replay
#: key, client key, the proof's remaining lifetime as the worker sees it, max_size,
#: max_per_key, expiry margin (milliseconds). Answers {1} recorded, {0} replay,
#: {-1, ms until the oldest entry expires} full, {-2, ms until the key's oldest
#: expires} over its share.
_SCRIPT = """
if redis.replicate_commands then
  pcall(redis.replicate_commands)
end
local seen, owners, mine = KEYS[1], KEYS[2], KEYS[3]
local member, owner = ARGV[1], ARGV[2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local deadline = now + tonumber(ARGV[3])
local max_size, max_per_key = tonumber(ARGV[4]), tonumber(ARGV[5])
local margin = tonumber(ARGV[6])
local past = '(' .. now
redis.call('ZREMRANGEBYSCORE', seen, '-inf', past)
redis.call('ZREMRANGEBYSCORE', owners, '-inf', past)
redis.call('ZREMRANGEBYSCORE', mine, '-inf', past)
if redis.call('ZSCORE', seen, member) then
  return {0}
end
local free = max_size - redis.call('ZCARD', seen)
if free <= 0 then
  local oldest = redis.call('ZRANGE', seen, 0, 0, 'WITHSCORES')
  return {-1, (tonumber(oldest[2]) or now) - now}
end
local live = redis.call('ZCARD', mine)
local keys = redis.call('ZCARD', owners)
if live == 0 then
  keys = keys + 1
end
if live >= max_per_key or live * keys >= free then
  local oldest = redis.call('ZRANGE', mine, 0, 0, 'WITHSCORES')
  return {-2, (tonumber(oldest[2]) or now) - now}
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


def _no_script(redis: Any, answer: object) -> bool:
    return isinstance(answer, redis.exceptions.NoScriptError) or (
        isinstance(answer, redis.ResponseError) and str(answer).startswith("NOSCRIPT")
    )


def _refusal(message: str, **flags: Any) -> DPoPReplayError:
    error = DPoPReplayError(message)
    for name, value in flags.items():
        setattr(error, name, value)
    return error


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds")
    return float(value)


#: Proofs sent in one pipeline at most (a burst is sent in several).
_BATCH = 256


class _Pipeline:
    """The async path's one I/O thread per store and process: proofs pipelined.

    Every event loop of the process hands its proofs here; the thread sends
    all that are waiting as one pipeline (``EVALSHA`` each, one round trip)
    on the sync client and settles each caller's future on its own loop.
    Measured under a burst (``bench/dpop_redis_bench.py``): awaiting a pool
    connection and Redis's answer on a congested event loop (500 clients on
    one worker) misses a 0.25 s timeout while Redis is healthy, because the
    loop reaches the answer late; here the timeout is the socket's, in a
    thread the event loop does not hold up, and a burst costs a few round
    trips instead of one connection per request.
    """

    def __init__(self, store: RedisReplayStore) -> None:
        self._store = weakref.ref(store)
        self._condition = threading.Condition()
        self._waiting: list[tuple[Sequence[str], Sequence[Any], Any, Any]] = []
        self._thread: threading.Thread | None = None
        self._stopped = False
        at_fork_child(self._after_fork)
        at_stop(self._stopper())

    def _stopper(self) -> Callable[[], None]:
        ref = weakref.ref(self)

        def stop() -> None:
            pipeline = ref()
            if pipeline is not None:
                pipeline.stop()

        return stop

    def _after_fork(self) -> None:
        self._condition = threading.Condition()
        self._waiting = []
        self._thread = None

    def submit(self, keys: Sequence[str], args: Sequence[Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._condition:
            if self._stopped:
                future.set_exception(ConnectionError("the replay store is closed"))
                return future
            self._waiting.append((keys, args, loop, future))
            if self._thread is None or not self._thread.is_alive():
                self._thread = spawn(self._run, "grelmicro-dpop-redis")
                if self._thread is None:  # the interpreter is exiting
                    self._waiting.clear()
                    future.set_exception(ConnectionError("the interpreter is exiting"))
                    return future
            self._condition.notify()
        return future

    def stop(self) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify_all()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._waiting and not self._stopped:
                    self._condition.wait()
                batch, self._waiting = self._waiting[:_BATCH], self._waiting[_BATCH:]
            if not batch:
                return
            store = self._store()
            if store is None:
                answers: list[Any] = [ConnectionError("the replay store is gone")] * len(batch)
            else:
                answers = store._send([(keys, args) for keys, args, _, _ in batch])
                del store
            for (_, _, loop, future), answer in zip(batch, answers, strict=True):
                with contextlib.suppress(RuntimeError):  # that loop has closed
                    loop.call_soon_threadsafe(_settle, future, answer)


def _settle(future: asyncio.Future[Any], answer: Any) -> None:
    if future.done():  # its caller was cancelled
        return
    if isinstance(answer, BaseException):
        future.set_exception(answer)
    else:
        future.set_result(answer)


class RedisReplayStore:
    """A DPoP replay store shared by every process, in Redis (5.0 or later) or Valkey.

    Plug it into every worker's :class:`~grelmicro.jwt.DPoPVerifier`
    (``replay_store=``): a proof is then accepted once per fleet. Each proof
    costs one round trip (a server-side script on the server's clock; see the
    module documentation). :meth:`record` is the blocking call for sync
    code; :meth:`record_async` awaits the store's I/O thread, which pipelines
    every proof waiting, without blocking the event loop.

    Args:
        url: the server, ``redis://host:6379/0`` (``rediss://`` for TLS,
            ``unix://`` for a socket). Or give ``client`` (and
            ``async_client``) built yourself, e.g. from a Sentinel.
        client: a ``redis.Redis``, a ``redis.RedisCluster`` or a Sentinel
            master's client; both paths use it (the async one through the
            store's I/O thread).
        async_client: a ``redis.asyncio.Redis`` :meth:`record_async` awaits
            on the event loop instead of the I/O thread (its pool is then
            yours to size: one that raises when exhausted refuses a burst).
        prefix: the keys' hash tag: ``{prefix}:seen``, ``{prefix}:owners``,
            ``{prefix}:key:<thumbprint>``. One per fleet that shares proofs.
        max_size: live entries the store holds at most (about 300 bytes each
            in Redis: some 160 MB when full at the default).
        max_per_key: live entries one client key holds at most (default
            ``max_size // 128``); a key's fair share may be lower.
        timeout: seconds to connect, to wait for an answer, and to wait for
            a free connection of the pool, each.
        max_connections: the blocking path's connection pool, per process
            (a caller beyond it waits up to ``timeout``; size it to the sync
            threads of one worker, e.g. anyio's 40). The async path takes
            one connection at a time, whatever the burst.
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
        self._pipeline = _Pipeline(self)
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
            # A burst beyond the pool waits for a connection, up to `timeout`:
            # a busy pool is not an outage (it raised at once before; N25).
            "timeout": self.timeout,
            # One retry: a pooled connection that a restarted server closed.
            "retry": Retry(NoBackoff(), 1),
        }

    def _sync_client(self) -> Any:
        assert self._url is not None  # noqa: S101 - only called with a url
        try:
            pool = self._redis.BlockingConnectionPool.from_url(self._url, **self._options())
        except ValueError:
            raise ConfigurationError(
                "url must be a Redis URL such as 'redis://localhost:6379/0'"
            ) from None
        return self._redis.Redis(connection_pool=pool)

    def _async_script(self) -> Any:
        """The script on the ``async_client`` given (registered once per event loop)."""
        loop = asyncio.get_running_loop()
        current = self._async
        if current is not None and current[0] is loop:
            return current[2]
        with self._lock:
            script = self._async_given.register_script(_SCRIPT)
            self._async = (loop, self._async_given, script)
        return script

    def _send(self, batch: list[tuple[Sequence[str], Sequence[Any]]]) -> list[Any]:
        """One pipeline of the script for every proof of ``batch`` (the I/O thread's call).

        Answers in order: the script's answer, or the exception for that proof.
        """
        try:
            answers = self._pipelined(batch)
            missing = [i for i, answer in enumerate(answers) if _no_script(self._redis, answer)]
            if missing:  # a restarted or flushed server: load the script, send those again
                self._client.script_load(_SCRIPT)
                again = self._pipelined([batch[i] for i in missing])
                for i, answer in zip(missing, again, strict=True):
                    answers[i] = answer
        except self._redis.RedisError as exc:
            return [exc] * len(batch)
        return answers

    def _pipelined(self, batch: list[tuple[Sequence[str], Sequence[Any]]]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for keys, args in batch:
            pipe.execute_command("EVALSHA", self._script.sha, len(keys), *keys, *args)
        return list(pipe.execute(raise_on_error=False))

    # -- the ReplayBackend ---------------------------------------------------

    def _arguments(
        self, key: bytes, owner: str, now: float, until: float
    ) -> tuple[Sequence[str], Sequence[Any]]:
        keys = (self._seen, self._owners, f"{{{self.prefix}}}:key:{owner}")
        # Only the remaining lifetime crosses: the server dates the entry by
        # its own clock, so a worker's skew cannot expire anyone's entries.
        args = (
            key,
            owner,
            max(1, math.ceil((until - now) * 1000)),
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
        return self._answer(answer)

    async def record_async(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        """:meth:`record` for async code: the round trip does not block the event loop."""
        keys, args = self._arguments(key, owner, now, until)
        try:
            if self._async_given is not None:
                answer = await self._async_script()(keys=keys, args=args)
            else:
                answer = await self._pipeline.submit(keys, args)
                if isinstance(answer, self._redis.RedisError):
                    raise answer
        except self._redis.RedisError as exc:
            return self._when_down(exc, key, owner, now, until)
        return self._answer(answer)

    def _answer(self, answer: Any) -> bool:
        if self._down:
            self._down = False
            logger.info(
                "DPoP replay store %s reachable again", self.prefix,
                extra={"jwt_event": "dpop.replay_store.up"},
            )  # fmt: skip
        status = int(answer[0])
        if status >= 0:
            return status == 1
        seconds = max(0.0, float(answer[1]) / 1000)
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
        """Stop the async path's I/O thread and close the client's connections."""
        self._pipeline.stop()
        self._client.close()
