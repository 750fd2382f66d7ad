"""One verifier shared by many threads: no exception, no crossed claims, bounded cache.

Twelve threads hammer one :class:`JWTVerifier` whose cache is far smaller
than the token population, with ``sys.setswitchinterval(1e-6)`` so the GIL
(where there is one) changes hands as often as possible. Virtual time moves
forward with each thread's own steps (``now=`` per call) so tokens expire
while they are cached, and another thread rotates the keys so that some
tokens lose their key and regain it. Every answer is checked against what
that token alone deserves. The run is a number of steps, never a stretch of
wall time: what it covers does not depend on the machine's speed or load.

Runs on the free-threaded build too, where ``sys._is_gil_enabled()`` must
stay ``False``. The keys are HMAC so that no ``cryptography`` is needed: it
cannot be installed on the free-threaded 3.13 build (cffi refuses 3.13t).

``GRELMICRO_STRESS_STEPS`` sets the verifications per thread (default 3000).
"""

from __future__ import annotations

import os
import random
import sys
import sysconfig
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from forge import NOW, SECRET, hmac_key, private_key, tamper

from grelmicro.jwt import (
    Claims,
    ExpiredTokenError,
    InvalidSignatureError,
    JWTVerifier,
    Key,
    TokenRejectedError,
    UnknownKeyError,
)

STEPS = int(os.environ.get("GRELMICRO_STRESS_STEPS", "3000"))
MIN_ROTATIONS = 20  # the rotator goes on until the workers are done and it did as many
THREADS = 12
POPULATION = 200
CACHE_SIZE = 16
CACHE_TTL = 10.0  # virtual seconds: entries also die of old age during the run
SPAN = 100.0  # virtual seconds covered by one run
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

pytestmark = [pytest.mark.slow, pytest.mark.freethreaded]


@dataclass(frozen=True)
class Case:
    token: str | bytes
    jti: str
    exp: int
    rotating: bool  # signed by the key that rotation adds and removes
    forged: bool = False


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    hits: int = 0
    failures: list[str] = field(default_factory=list)
    cache_samples: list[tuple[int, int]] = field(default_factory=list)
    rotations: int = 0
    #: Refusals of a ``rotating`` token the rotator saw right after taking its key away.
    withdrawn: int = 0


def population() -> list[Case]:
    stable = hmac_key(kid="stable")
    rotating = private_key("HS512", kid="rotating", seed=1)
    cases = []
    for i in range(POPULATION):
        exp = NOW + 5 + (i * 7919) % 195  # spread over the run and beyond its end
        is_rotating = i % 4 == 0
        signer = rotating if is_rotating else stable
        token = signer.mint({"jti": f"t{i}", "sub": f"user-{i}", "exp": exp})
        forged = i % 25 == 1
        if forged:
            token = tamper(token)
        cases.append(
            Case(
                token=token.encode() if i % 3 == 0 else token,
                jti=f"t{i}",
                exp=exp,
                rotating=is_rotating,
                forged=forged,
            )
        )
    return cases


def key_sets() -> tuple[list[Key], list[Key]]:
    """Both sets serve HS256 and HS512; only the first holds the ``rotating`` kid."""
    rotating = private_key("HS512", kid="rotating", seed=1)
    other = private_key("HS512", kid="other", seed=2)
    always = [
        Key.secret(SECRET, "HS256", kid="stable"),
        Key.secret(other.private, "HS512", kid="other"),
    ]
    with_rotating = [*always, Key.secret(rotating.private, "HS512", kid="rotating")]
    return with_rotating, always


def allowed(case: Case, now: float) -> set[type[TokenRejectedError]]:
    """The rejections this token may get at ``now``; an empty set means it must pass."""
    if case.forged:
        return (
            {InvalidSignatureError, UnknownKeyError} if case.rotating else {InvalidSignatureError}
        )
    expected: set[type[TokenRejectedError]] = set() if now < case.exp else {ExpiredTokenError}
    if case.rotating:
        expected.add(UnknownKeyError)  # its key may be rotated out at this instant
    return expected


@pytest.fixture
def fast_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def hammer(
    verifier: JWTVerifier,
    cases: list[Case],
    start: threading.Barrier,
    tally: Tally,
    lock: threading.Lock,
    seed: int,
) -> None:
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    seen: dict[str, Claims] = {}
    hits = 0
    start.wait()
    try:
        for step in range(STEPS):
            now = NOW + SPAN * step / STEPS + rng.uniform(-3.0, 3.0)
            case = cases[rng.randrange(len(cases))]
            expected = allowed(case, now)
            try:
                claims = verifier.verify(case.token, now=now)
            except TokenRejectedError as exc:
                outcomes[exc.reason] += 1
                if type(exc) not in expected:
                    failures.append(f"{case.jti} at {now:.3f}: {type(exc).__name__} {exc}")
                continue
            outcomes["ok"] += 1
            if expected and not expected <= {UnknownKeyError}:
                failures.append(f"{case.jti} at {now:.3f} (exp {case.exp}): accepted")
            if type(claims) is not Claims or claims.get("jti") != case.jti:
                failures.append(f"asked for {case.jti}, got claims of {claims.get('jti')}")
            elif claims["exp"] != case.exp or claims.subject != f"user-{case.jti[1:]}":
                failures.append(f"{case.jti}: claims do not match the token")
            if seen.get(case.jti) is claims:
                hits += 1
            seen[case.jti] = claims
    except BaseException:  # anything else is a failure of the verifier
        failures.append(traceback.format_exc())
    with lock:
        tally.outcomes.update(outcomes)
        tally.failures.extend(failures)
        tally.hits += hits


def sample_cache(verifier: JWTVerifier, stop: threading.Event, tally: Tally) -> None:
    while True:  # one sample at least, however late this thread gets to run
        cache = verifier._cache
        assert cache is not None
        tally.cache_samples.append((len(cache), cache._table._order_length))
        if stop.is_set():
            return
        time.sleep(0.0005)


def rotate_keys(
    verifier: JWTVerifier, stop: threading.Event, tally: Tally, withdrawn: Case
) -> None:
    """Alternate the key sets until told to stop and ``MIN_ROTATIONS`` are done.

    After each rotation that takes the ``rotating`` key away, the rotator
    (the only thread that rotates) checks that ``withdrawn``, a token of
    that key, is refused at once, whatever the workers were doing.
    """
    sets = key_sets()
    try:
        while not stop.is_set() or tally.rotations < MIN_ROTATIONS:
            verifier.rotate(sets[tally.rotations % 2])
            tally.rotations += 1
            if tally.rotations % 2 == 0:  # sets[1]: the rotating key is gone
                try:
                    verifier.verify(withdrawn.token, now=NOW)
                except UnknownKeyError:
                    tally.withdrawn += 1
            time.sleep(0.002)
    except BaseException:
        tally.failures.append("rotate: " + traceback.format_exc())


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"cache_key": "digest"}, id="digest-key"),
        pytest.param({"cache_key": "token"}, id="token-key"),
        pytest.param({"cache_key": "digest", "cache_stats": True}, id="digest-key-counted"),
    ],
)
def test_shared_verifier_under_contention(settings: dict[str, object], fast_switching: None):
    # Arrange
    cases = population()
    verifier = JWTVerifier(
        key_sets()[0],
        cache_size=CACHE_SIZE,
        cache_ttl=CACHE_TTL,
        **settings,  # type: ignore[arg-type]
    )
    tally = Tally()
    lock = threading.Lock()
    stop = threading.Event()
    start = threading.Barrier(THREADS + 1)
    withdrawn = next(c for c in cases if c.rotating and not c.forged and c.exp > NOW)
    workers = [
        threading.Thread(
            target=hammer,
            args=(verifier, cases, start, tally, lock, seed),
            name=f"verify-{seed}",
        )
        for seed in range(THREADS)
    ]
    helpers = [
        threading.Thread(target=sample_cache, args=(verifier, stop, tally), name="sampler"),
        threading.Thread(
            target=rotate_keys, args=(verifier, stop, tally, withdrawn), name="rotator"
        ),
    ]
    gil_before = sys._is_gil_enabled() if FREE_THREADED else None  # type: ignore[attr-defined]

    # Act
    for thread in workers + helpers:
        thread.start()
    start.wait()
    for thread in workers:
        thread.join(timeout=600)  # a hang guard
    stop.set()
    for thread in helpers:
        thread.join(timeout=60)

    # Assert
    assert not any(thread.is_alive() for thread in workers + helpers)
    assert tally.failures == []
    assert tally.outcomes["ok"] > 0
    assert tally.outcomes["expired"] > 0
    assert tally.withdrawn == tally.rotations // 2  # rotation really took the key away
    assert tally.outcomes["signature"] > 0
    assert set(tally.outcomes) <= {"ok", "expired", "unknown-key", "signature"}
    assert tally.hits > 0  # the cache served shared objects
    assert tally.rotations >= MIN_ROTATIONS
    assert tally.cache_samples
    assert max(size for size, _ in tally.cache_samples) <= CACHE_SIZE
    assert max(length for _, length in tally.cache_samples) <= CACHE_SIZE
    cache = verifier._cache
    assert cache is not None
    assert len(cache) == cache._table._order_length <= CACHE_SIZE
    assert len(set(cache._table._keys())) == len(cache)  # each entry once in the order
    if settings.get("cache_stats"):
        info = verifier.cache_info()
        assert info.hits is not None
        assert info.hits > 0
    if FREE_THREADED:
        assert gil_before is False
        assert sys._is_gil_enabled() is False  # type: ignore[attr-defined]


def test_many_threads_same_token_get_one_answer(fast_switching: None):
    """A burst on one token: every thread gets equal claims, the cache keeps one entry."""
    signer = hmac_key(kid="stable")
    token = signer.mint({"jti": "only", "exp": NOW + 60})
    verifier = JWTVerifier([Key.secret(SECRET, kid="stable")], cache_size=4)
    start = threading.Barrier(THREADS)
    results: list[object] = []
    lock = threading.Lock()

    def work() -> None:
        start.wait()
        mine = [verifier.verify(token, now=NOW) for _ in range(2000)]
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(results) == THREADS * 2000
    assert all(claims == {"jti": "only", "exp": NOW + 60} for claims in results)
    cache = verifier._cache
    assert cache is not None
    assert len(cache) == cache._table._order_length == 1
