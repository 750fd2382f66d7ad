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
            if store.record(keys[index], owners[index], now=NOW, until=NOW + 70):
                mine.append(index)
            else:
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
    store = ReplayStore(256, shards=16, max_per_key=2)
    owners = [f"owner-{index}" for index in range(397)]
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def work(seed: int) -> None:
        local: Counter[str] = Counter()
        for index in range(2000):
            key = (seed * 1_000_000 + index).to_bytes(32, "big")
            try:
                recorded = store.record(key, owners[index % 397], now=NOW, until=NOW + 70)
                local["accepted" if recorded else "replay"] += 1
            except DPoPReplayError as exc:
                local["full" if exc.store_full else "quota" if exc.over_quota else "?"] += 1
            assert len(store) <= 256
        with lock:
            outcomes.update(local)

    assert together(THREADS, work) == []
    assert outcomes["replay"] == outcomes["?"] == 0
    # 397 keys, each let in while the store has room: the store fills,
    # every key holds at most its quota, and the counts add up.
    assert outcomes["accepted"] == len(store) == sum(store.shard_lengths()) == 256
    assert max(store.live_for(owner) for owner in owners) <= 2
    assert sum(store.live_for(owner) for owner in owners) == 256
    assert outcomes["accepted"] + outcomes["full"] + outcomes["quota"] == THREADS * 2000


def test_a_key_over_its_quota_never_refuses_others_under_threads():
    # Sized so that the fair shares (free room / keys) stay above the
    # quota: 361 keys, at most 3,632 entries, 12,752 places free.
    store = ReplayStore(16384, shards=8, max_per_key=32)
    refused: Counter[str] = Counter()
    lock = threading.Lock()

    def work(seed: int) -> None:
        local: Counter[str] = Counter()
        for index in range(600):
            # Half the threads flood with one key; the others are 60 honest
            # clients of 10 proofs each (600 in all per thread, 3,600 in all).
            owner = "attacker" if seed % 2 else f"client-{seed}-{index % 60}"
            key = (seed * 1_000_000 + index).to_bytes(32, "big")
            try:
                assert store.record(key, owner, now=NOW, until=NOW + 70)
            except DPoPReplayError as exc:
                who = "attacker" if owner == "attacker" else "honest"
                local[f"{who} over quota" if exc.over_quota else f"{who} other"] += 1
        with lock:
            refused.update(local)

    assert together(THREADS, work) == []
    assert refused == Counter({"attacker over quota": 6 * 600 - 32})
    assert store.live_for("attacker") == 32
    assert len(store) == 6 * 600 + 32


def test_expired_entries_make_room_again_under_threads():
    store = ReplayStore(64, shards=4)
    old = [index.to_bytes(32, "big") for index in range(200)]
    for index, key in enumerate(old):
        try:
            assert store.record(key, f"o{index}", now=NOW, until=NOW + 10)
        except DPoPReplayError as exc:
            if not exc.store_full:
                raise
    assert len(store) == 64

    def work(seed: int) -> None:
        for index in range(100):
            key = (10_000 + seed * 1000 + index).to_bytes(32, "big")
            try:
                assert store.record(key, f"o{seed}-{index}", now=NOW + 11, until=NOW + 81)
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
