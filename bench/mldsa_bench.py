"""What a post-quantum token costs: ML-DSA-44/65/87 beside EdDSA and RS256.

Builds, in one process, one verifier per algorithm over the canonical bench
payload (``fixtures.typical_payload``; ``aud`` and ``iss`` checked) and times,
interleaved in rounds so load changes hit every lane alike:

- ``full``: ``cache_size=0``, the whole verification every call;
- ``hit``: the same token again, from the verified-token cache.

ML-DSA tokens are signed with ``cryptography`` (its OpenSSL backend), the
others as every bench token is (``fixtures.encode``). Prints, per algorithm,
the token and signature sizes in bytes and the median µs per call of each
mode. ML-DSA is named in ``algorithms=`` (it is never allowed by default).
Run: ``.venv/bin/python bench/mldsa_bench.py [--rounds 15] [--calls 2000]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cryptography.hazmat.primitives.asymmetric import ed25519, mldsa, rsa
from fixtures import AUDIENCE, ISSUER, KID, encode, public_material, typical_payload

from grelmicro.jwt import JWTVerifier, Key

ML_DSA = {
    "ML-DSA-44": mldsa.MLDSA44PrivateKey,
    "ML-DSA-65": mldsa.MLDSA65PrivateKey,
    "ML-DSA-87": mldsa.MLDSA87PrivateKey,
}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_mldsa(alg: str, private: object, payload: dict) -> str:
    header = {"alg": alg, "typ": "JWT", "kid": KID}
    compact = json.dumps(header, separators=(",", ":")).encode()
    body = json.dumps(payload, separators=(",", ":")).encode()
    message = f"{b64url(compact)}.{b64url(body)}"
    return f"{message}.{b64url(private.sign(message.encode()))}"  # type: ignore[attr-defined]


def cases(payload: dict) -> dict[str, tuple[Key, str]]:
    """Per algorithm: its public key (parsed once) and a token."""
    out: dict[str, tuple[Key, str]] = {}
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ed_key = ed25519.Ed25519PrivateKey.generate()
    for alg, private, name in (("RS256", rsa_key, "rsa-2048"), ("EdDSA", ed_key, "ed25519")):
        jwk = {**public_material(name, private)["jwk"], "alg": alg, "kid": KID}
        out[alg] = (Key.jwk(jwk), encode(alg, private, payload))
    for alg, cls in ML_DSA.items():
        private = cls.generate()
        raw = private.public_key().public_bytes_raw()
        jwk = {"kty": "AKP", "alg": alg, "pub": b64url(raw), "kid": KID}
        out[alg] = (Key.jwk(jwk), mint_mldsa(alg, private, payload))
    return out


def per_call_us(verify: Callable[[str], object], token: str, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        verify(token)
    return (time.perf_counter_ns() - start) / calls / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000, help="full verifications per round")
    args = parser.parse_args()

    payload = typical_payload(int(time.time()))
    built = cases(payload)
    lanes: dict[tuple[str, str], tuple[Callable[[str], object], str, int]] = {}
    for alg, (key, token) in built.items():
        for mode, cache_size, calls in (
            ("full", 0, args.calls),
            ("hit", 1024, args.calls * 10),
        ):
            verifier = JWTVerifier(
                [key], algorithms=[alg], audience=AUDIENCE, issuer=ISSUER, cache_size=cache_size
            )
            assert verifier.verify(token)["iss"] == ISSUER  # checked before timing
            lanes[alg, mode] = (verifier.verify, token, calls)
    samples: dict[tuple[str, str], list[float]] = {lane: [] for lane in lanes}
    order = list(lanes)
    for round_index in range(args.rounds):
        shift = round_index % len(order)
        for lane in order[shift:] + order[:shift]:
            verify, token, calls = lanes[lane]
            samples[lane].append(per_call_us(verify, token, calls))

    print(
        f"# mldsa_bench: Python {platform.python_version()} ({platform.machine()}), "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
        f"{args.rounds} interleaved rounds, median µs/call"
    )
    print("| alg | token bytes | signature bytes | full verify µs | cache hit µs |")
    print("|---|---:|---:|---:|---:|")
    for alg, (_key, token) in built.items():
        signature = token.rsplit(".", 1)[1]
        signature_bytes = len(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
        full = statistics.median(samples[alg, "full"])
        hit = statistics.median(samples[alg, "hit"])
        print(f"| {alg} | {len(token)} | {signature_bytes} | {full:.1f} | {hit:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
