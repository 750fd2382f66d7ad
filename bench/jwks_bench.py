"""Keys from a JWKS URL cost nothing on the request path: static vs network, side by side.

Builds, in one process, verifiers over the same public key and the same
tokens: one with static keys (``Key.jwk``), one whose keys come from a JWKS
URL served on 127.0.0.1 (loaded once before timing, no fetch while timed),
and one routing between two issuers. Times, interleaved in rounds so load
changes hit every lane alike:

- ``hit``: the same token again (a cache hit);
- ``full``: ``cache_size=0``, the whole verification every call.

Prints the median ns per call of each lane and the ratio to static keys.
Run: ``.venv/bin/python bench/jwks_bench.py [--rounds 15] [--calls 20000]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fixtures import AUDIENCE, ISSUER, encode, public_material, typical_payload
from support import documents

from grelmicro.jwt import Issuer, JWTVerifier, Key

OTHER_ISSUER = "https://other-issuer.example.com/"


def per_call_ns(verify: Callable[[str], object], token: str, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        verify(token)
    return (time.perf_counter_ns() - start) / calls


def build(jwk: dict, base: str, token: str, cache_size: int) -> dict[str, JWTVerifier]:
    """The three lanes over one public key; network keys loaded before timing."""
    policy = {"audience": AUDIENCE, "cache_size": cache_size}
    static = JWTVerifier([Key.jwk(jwk)], issuer=ISSUER, **policy)
    network = JWTVerifier(
        jwks_url=base + "/jwks", allow_insecure_loopback=True, issuer=ISSUER, **policy
    )
    routed = JWTVerifier(
        issuers=[
            Issuer(ISSUER, jwks_url=base + "/jwks", allow_insecure_loopback=True),
            Issuer(OTHER_ISSUER, jwks_url=base + "/other", allow_insecure_loopback=True),
        ],
        **policy,
    )
    for verifier in (static, network, routed):
        assert verifier.verify(token)["iss"] == ISSUER  # loads the network keys
    return {"static": static, "jwks_url": network, "two issuers": routed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20000, help="calls per lane per round (hits)")
    args = parser.parse_args()

    now = int(time.time())
    payload = typical_payload(now)
    keys = {
        "RS256": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ES256": ec.generate_private_key(ec.SECP256R1()),
    }
    names = {"RS256": "rsa-2048", "ES256": "p-256"}
    other = ec.generate_private_key(ec.SECP256R1())
    other_jwk = {**public_material("p-256", other)["jwk"], "kid": "o1"}

    rows: list[tuple[str, str, float, float, float]] = []
    for alg, private in keys.items():
        jwk = {**public_material(names[alg], private)["jwk"], "alg": alg}
        pages = {
            "/jwks": {"keys": [jwk]},
            "/other": {"keys": [other_jwk]},
        }
        # max-age: the network lanes must not refetch while timed.
        with documents(pages, {"Cache-Control": "max-age=86400"}) as (base, _):
            token = encode(alg, private, payload)

            for mode, cache_size, calls in (
                ("hit", 1024, args.calls),
                ("full", 0, max(args.calls // 20, 200)),
            ):
                lanes = build(jwk, base, token, cache_size)
                fetches = [v.health().fetch_count for v in lanes.values()]
                samples: dict[str, list[float]] = {name: [] for name in lanes}
                for _ in range(args.rounds):
                    for name, verifier in lanes.items():
                        samples[name].append(per_call_ns(verifier.verify, token, calls))
                after = [v.health().fetch_count for v in lanes.values()]
                assert fetches == after, "a fetch happened while timing"
                static_ns = statistics.median(samples["static"])
                rows.extend(
                    (
                        alg,
                        mode,
                        name,
                        statistics.median(values),
                        statistics.median(values) / static_ns,
                    )
                    for name, values in samples.items()
                )
                for verifier in lanes.values():
                    verifier.close()

    print(
        f"# jwks_bench: Python {platform.python_version()} ({platform.machine()}), "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
        f"{args.rounds} interleaved rounds, median ns/call"
    )
    print(f"{'alg':6} {'mode':5} {'lane':12} {'ns/call':>10} {'vs static':>10}")
    for alg, mode, name, ns, ratio in rows:
        print(f"{alg:6} {mode:5} {name:12} {ns:10.0f} {ratio:10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
