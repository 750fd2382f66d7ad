"""The DPoP replay store under 12 threads: every proof accepted once, never past its bound.

The store-level floods need no ``cryptography``, so they also run on the
free-threaded interpreter; the end-to-end flood signs real proofs.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from forge import NOW, SECRET
from support import accepted_proofs, together

from grelmicro.jwt import DPoPReplayError, DPoPVerifier, JWTVerifier, Key, ReplayStore

THREADS = 12


def test_each_key_is_accepted_exactly_once_across_threads():
    store = ReplayStore(1 << 16)
    keys = [index.to_bytes(32, "big") for index in range(4000)]
    owners = [f"client-{index % 50}" for index in range(4000)]
    accepted: Counter[int] = Counter()
    replays = Counter[int]()
    lock = threading.Lock()

    def work(seed: int) -> None:
        order = list(range(len(keys)))
        random.Random(seed).shuffle(order)
        mine: list[int] = []
        refused = 0
        for index in order:
            try:
                store.add(keys[index], owners[index], now=NOW, deadline=NOW + 70)
                mine.append(index)
            except DPoPReplayError as exc:
                if exc.store_full:
                    raise
                refused += 1
        with lock:
            accepted.update(mine)
            replays[seed] = refused

    assert together(THREADS, work) == []
    # Every key was presented 12 times: accepted once, refused 11 times.
    assert sorted(accepted) == list(range(len(keys)))
    assert set(accepted.values()) == {1}
    assert sum(replays.values()) == len(keys) * (THREADS - 1)
    assert len(store) == len(keys)


def test_a_flood_of_unique_keys_never_grows_the_store_past_its_bound():
    store = ReplayStore(256, shards=16)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def work(seed: int) -> None:
        local: Counter[str] = Counter()
        for index in range(2000):
            key = (seed * 1_000_000 + index).to_bytes(32, "big")
            try:
                store.add(key, f"owner-{index % 97}", now=NOW, deadline=NOW + 70)
                local["accepted"] += 1
            except DPoPReplayError as exc:
                local["full" if exc.store_full else "replay"] += 1
            assert len(store) <= 256
        with lock:
            outcomes.update(local)

    assert together(THREADS, work) == []
    assert outcomes["replay"] == 0
    assert outcomes["accepted"] == len(store) <= 256
    assert max(store.shard_lengths()) <= store.shard_size
    assert outcomes["accepted"] + outcomes["full"] == THREADS * 2000


def test_expired_entries_make_room_again_under_threads():
    store = ReplayStore(64, shards=4)
    old = [index.to_bytes(32, "big") for index in range(200)]
    for index, key in enumerate(old):
        try:
            store.add(key, f"o{index}", now=NOW, deadline=NOW + 10)
        except DPoPReplayError as exc:
            if not exc.store_full:
                raise
    assert len(store) == 64

    def work(seed: int) -> None:
        for index in range(100):
            key = (10_000 + seed * 1000 + index).to_bytes(32, "big")
            try:
                store.add(key, f"o{index}", now=NOW + 11, deadline=NOW + 81)
            except DPoPReplayError as exc:
                if not exc.store_full:
                    raise

    assert together(THREADS, work) == []
    # Full again, of new entries only: every expired one was drained.
    assert len(store) == 64
    remembered = {key for shard in store._shards for key in shard.entries}
    assert not remembered & set(old)


def test_replayed_proofs_across_threads_are_accepted_once():
    pytest.importorskip("cryptography", reason="DPoP proofs are signed with cryptography")
    from dpop_proofs import URI, ProofSigner, access_token  # noqa: PLC0415

    signer = ProofSigner("ES256")
    token = access_token(signer.jkt)
    claims = JWTVerifier([Key.secret(SECRET, "HS256")]).verify(token, now=NOW)
    proofs = [signer.proof(access_token=token) for _ in range(300)]
    dpop = DPoPVerifier()
    accepted: Counter[int] = Counter()
    lock = threading.Lock()

    def work(seed: int) -> None:
        order = list(range(len(proofs)))
        random.Random(seed).shuffle(order)
        mine = accepted_proofs(dpop, token, claims, proofs, order, uri=URI, now=NOW)
        with lock:
            accepted.update(mine)

    assert together(THREADS, work) == []
    assert sorted(accepted) == list(range(len(proofs)))
    assert set(accepted.values()) == {1}
