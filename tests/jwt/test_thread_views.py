"""``verifier.verify`` keeps a view of the cache per thread (``VerifyCall``).

A hit in the calling thread's view returns claims that thread built around
the stored payload, so threads never share the reference count of the
object a hit returns (see ``docs/design-notes.md``, "Cache hits that scale").
These tests pin the contract the views must keep with the shared table: the
same answers, the same deadlines, invalidation by ``clear()`` and by key
rotation, a bound, and nothing kept alive after the verifier is gone.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key
from support import in_thread

from grelmicro.jwt import Claims, JWTVerifier, Key, TokenRejectedError, UnknownKeyError, _core
from grelmicro.jwt._cache import TokenCache

OLD = hmac_key(kid="old")
NEW = hmac_key(kid="new", secret=b"another-secret-of-a-sufficient-length-0123")


def test_a_thread_hits_its_own_claims_equal_to_the_stored_ones():
    verifier = JWTVerifier([Key.secret(SECRET)], cache_stats=True)
    token = hmac_key().mint({"exp": NOW + 60, "sub": "u1", "roles": ["a", "b"]})
    stored = verifier.verify(token, now=NOW)

    def pool() -> tuple[Claims, Claims, Claims]:
        return (
            verifier.verify(token, now=NOW),
            verifier.verify(token, now=NOW + 1),
            verifier.verify(token, now=NOW + 2),
        )

    first, second, third = in_thread(pool)

    assert first == stored
    assert first is not stored  # built by the pool thread
    assert second is first  # hits in that thread's view
    assert third is first
    assert first.subject == "u1"
    assert first["roles"] == ("a", "b")
    info = verifier.cache_info()
    assert (info.hits, info.misses, info.size) == (3, 1, 1)  # one verification only
    assert verifier.verify(token, now=NOW) is stored  # the storing thread keeps its own


def test_a_view_serves_only_inside_the_entry_window():
    verifier = JWTVerifier([Key.secret(SECRET)], cache_stats=True, cache_ttl=30)
    token = hmac_key().mint({"exp": NOW + 60})
    verifier.verify(token, now=NOW)

    def pool() -> tuple[Any, ...]:
        verifier.verify(token, now=NOW + 1)  # into the view
        before = verifier.cache_info()
        verifier.verify(token, now=NOW - 5)  # before it was stored: not from the view
        return before, verifier.cache_info()

    before, after = in_thread(pool)

    assert after.misses == before.misses + 1
    with pytest.raises(TokenRejectedError):
        verifier.verify(token, now=NOW + 61)  # past exp: the core refuses, no view serves it


def test_clearing_the_table_makes_every_view_stale():
    verifier = JWTVerifier([Key.secret(SECRET)], cache_stats=True)
    token = hmac_key().mint({"exp": NOW + 60})
    go, cleared, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def pool() -> None:
        verifier.verify(token, now=NOW)
        verifier.verify(token, now=NOW)
        seen.append(verifier.cache_info().misses)
        go.set()
        cleared.wait(10)
        verifier.verify(token, now=NOW)
        seen.append(verifier.cache_info().misses)
        done.set()

    thread = threading.Thread(target=pool)
    thread.start()
    go.wait(10)
    assert verifier._cache is not None
    verifier._cache.clear()
    cleared.set()
    done.wait(10)
    thread.join(10)

    assert seen == [1, 2]  # verified again after the clear, not served from the view


def test_a_removed_key_takes_the_views_with_it():
    verifier = JWTVerifier([Key.secret(OLD.private, kid="old"), Key.secret(NEW.private, kid="new")])
    token = OLD.mint({"exp": NOW + 60})
    ready, rotated = threading.Event(), threading.Event()
    outcome: list[str] = []

    def pool() -> None:
        verifier.verify(token, now=NOW)
        verifier.verify(token, now=NOW)  # a hit in this thread's view
        ready.set()
        rotated.wait(10)
        try:
            verifier.verify(token, now=NOW)
        except UnknownKeyError:
            outcome.append("unknown-key")
        else:
            outcome.append("served")

    thread = threading.Thread(target=pool)
    thread.start()
    ready.wait(10)
    verifier.rotate([Key.secret(NEW.private, kid="new")])
    rotated.set()
    thread.join(10)

    assert outcome == ["unknown-key"]


def test_an_added_key_keeps_the_view():
    verifier = JWTVerifier([Key.secret(OLD.private, kid="old")])
    token = OLD.mint({"exp": NOW + 60})
    first = verifier.verify(token, now=NOW)

    # A key of another algorithm changes no cached answer: the cache stays, and
    # so does this thread's view of it.
    verifier.rotate([Key.secret(OLD.private, kid="old"), Key.secret(b"x" * 48, "HS384", kid="384")])

    assert verifier.verify(token, now=NOW) is first


def test_a_view_holds_at_most_cache_size_entries():
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=8)
    key = hmac_key()
    tokens = [key.mint({"exp": NOW + 60, "jti": str(i)}) for i in range(50)]

    def pool() -> list[int | None]:
        sizes = []
        for token in tokens:
            verifier.verify(token, now=NOW)  # a miss: verified, stored in the shared table
            verifier.verify(token, now=NOW)  # from the shared table into this thread's view
            sizes.append(verifier.verify._view_len())  # type: ignore[attr-defined]
        return sizes

    sizes = in_thread(pool)

    assert sizes[:3] == [1, 2, 3]
    assert max(s or 0 for s in sizes) == 8
    assert verifier.cache_info().size <= 8


class Held(dict):  # a claims type whose instances can be watched
    __slots__ = ("__weakref__",)


def test_views_do_not_keep_claims_alive_after_the_caller_is_gone():
    engine = JWTVerifier([Key.secret(SECRET)])._engine
    route = TokenCache(16, 300.0, verify=engine.verify, claims=Held, clock=lambda: NOW)
    calls = [_core.VerifyCall(route._table, clock=lambda: NOW, refuse=_reraise, signature=None)]
    token = hmac_key().mint({"exp": NOW + 60})
    watched: list[weakref.ref[Held]] = []
    other = _core.VerifyCall(route._table, clock=lambda: NOW, refuse=_reraise, signature=None)
    step, dropped, done = threading.Event(), threading.Event(), threading.Event()

    def pool() -> None:
        watched.append(weakref.ref(calls[0](token)))  # this thread's own claims, held by its view
        step.set()
        dropped.wait(10)
        other(token)  # this thread's first call on another caller prunes the dead view
        done.set()

    thread = threading.Thread(target=pool)
    thread.start()
    step.wait(10)
    assert watched[0]() is not None
    calls.clear()  # the caller is gone
    route.clear()  # the shared table held the payload's claims of the storing thread
    gc.collect()
    dropped.set()
    done.wait(10)
    thread.join(10)
    gc.collect()

    assert watched[0]() is None


def _reraise(error: BaseException, now: object) -> None:
    raise error


def test_refusals_through_a_view_are_our_errors():
    verifier = JWTVerifier([Key.secret(SECRET)])

    def pool() -> str:
        try:
            verifier.verify("not-a-token", now=NOW)
        except TokenRejectedError as exc:
            return exc.reason
        return "accepted"

    assert in_thread(pool) == "malformed"


def test_a_stream_of_new_tokens_fills_only_the_shared_table():
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=8)
    key = hmac_key()
    first = key.mint({"exp": NOW + 60, "jti": "first"})
    stored = verifier.verify(first, now=NOW)

    for i in range(5):
        verifier.verify(key.mint({"exp": NOW + 60, "jti": str(i)}), now=NOW)

    assert verifier.verify._view_len() == 0  # type: ignore[attr-defined]
    assert verifier.cache_info().size == 6
    assert verifier.verify(first, now=NOW) is stored  # the storing thread's own object
    assert verifier.verify._view_len() == 1  # type: ignore[attr-defined]
