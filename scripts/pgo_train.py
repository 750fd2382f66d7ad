"""The workload a profile-guided (PGO) build of grelmicro-core is trained on.

    python scripts/pgo_train.py        # run by scripts/corewheel.py --pgo

Run by ``scripts/corewheel.py`` with an instrumented core first on the path;
the counts it leaves decide which code the final build keeps hot and packed
together. So it does what a service does, in about the proportions a
service sees: the canonical token of ``shared/bench-token.md`` verified in
full (cache off) and served from the cache (both cache keys), per algorithm
family, from the main thread and from pool threads; and, far less often,
the refusals a public endpoint meets (expired, wrong audience, tampered,
malformed). HMAC only when ``cryptography`` is absent (the free-threaded
interpreters): the JSON, claims and Python paths are the same for every
algorithm, only the signature check differs.

Standard library, this tree's ``grelmicro`` and ``scripts/jws.py`` (the
tokens; nothing from ``tests/``); it
refuses to run unless the imported core is the instrumented one
(``grelmicro_core.PGO == "instrumented"``), so a stale install cannot train
nothing in silence.
"""

# A build step: it prints what it trained.
# ruff: noqa: T201
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grelmicro_core  # noqa: E402
import jws  # noqa: E402  (scripts/, this script's directory)

from grelmicro.jwt import JWTVerifier, Key, TokenRejectedError  # noqa: E402
from grelmicro.jwt._demo import AUDIENCE, ISSUER, canonical_payload  # noqa: E402

#: Full verifications per algorithm family (HMAC is the cheap, common one).
FULL = {"HS256": 40_000, "RS256": 1_500, "PS256": 1_500, "ES256": 1_000, "EdDSA": 1_000}
#: Cache hits per cache key.
HITS = 40_000
#: Each kind of refusal, per family.
REFUSALS = 300


def families() -> list[str]:
    """The algorithms to train: every family when ``cryptography`` imports."""
    try:
        import cryptography  # noqa: F401, PLC0415
    except ImportError:
        print("pgo_train: no cryptography here, training HMAC only")
        return ["HS256"]
    return list(FULL)


def refusals(alg: str, key: object, now: int) -> list[str]:
    """Tokens a verifier for ``alg`` refuses, one of each common kind."""
    header = {"alg": alg, "typ": "JWT", "kid": "k1"}
    expired = canonical_payload(now - 7_200)
    stranger = {**canonical_payload(now), "aud": "https://elsewhere.example.com"}
    good = jws.mint(header, canonical_payload(now), key)
    return [
        jws.mint(header, expired, key),
        jws.mint(header, stranger, key),
        jws.tamper(good),
        good[: len(good) // 2],
        "not-a-token",
    ]


def train(alg: str, now: int) -> int:
    """Runs one family's lanes; returns how many calls were made."""
    key = jws.generate(alg)
    token = jws.mint({"alg": alg, "typ": "JWT", "kid": "k1"}, canonical_payload(now), key)
    material = (
        Key.secret(key, alg, kid="k1")
        if alg.startswith("HS")
        else Key.pem(jws.spki_pem(key), alg, kid="k1")
    )
    cold = JWTVerifier([material], cache_size=0, audience=AUDIENCE, issuer=ISSUER)
    raw = token.encode()
    for index in range(FULL[alg]):
        cold.verify(token if index % 4 else raw)
    calls = FULL[alg]
    bad = refusals(alg, key, now)
    for _ in range(REFUSALS):
        calls += sum(_refused(cold, refused, alg) for refused in bad)
    for cache_key in ("digest", "token"):
        warm = JWTVerifier([material], cache_key=cache_key, audience=AUDIENCE, issuer=ISSUER)
        calls += _hits(warm, token, HITS // 2)
        with ThreadPoolExecutor(2) as pool:
            calls += sum(pool.map(_hits, [warm] * 2, [token] * 2, [HITS // 4] * 2))
    return calls


def _refused(verifier: JWTVerifier, token: str, alg: str) -> int:
    """1 once ``verifier`` refuses ``token`` (anything else stops the build)."""
    try:
        verifier.verify(token)
    except TokenRejectedError:
        return 1
    raise SystemExit(f"pgo_train: a {alg} verifier accepted a bad token")


def _hits(verifier: JWTVerifier, token: str, count: int) -> int:
    for _ in range(count):
        verifier.verify(token)
    return count


def main() -> int:
    """Trains every family this interpreter can sign for; refuses a plain core."""
    if getattr(grelmicro_core, "PGO", None) != "instrumented":
        raise SystemExit(
            f"pgo_train: {grelmicro_core.__file__} is not an instrumented build "
            f"(PGO={getattr(grelmicro_core, 'PGO', None)!r})"
        )
    now = int(time.time())
    start = time.perf_counter()
    for alg in families():
        calls = train(alg, now)
        print(f"pgo_train: {alg}: {calls:,} calls")
    print(f"pgo_train: done in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
