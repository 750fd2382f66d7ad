"""Keys and tokens for every lane, made once per run and shared by all runtimes.

The token shape is the canonical one of ``shared/bench-token.md``: compact JSON
header ``{"alg", "typ", "kid"}``, the typical payload, and larger payloads made
by adding a list of permission strings. Signing is done here with
``cryptography`` (no JWT library), so no lane verifies tokens its own library
produced. Tokens and key forms come from the tests' one token forge
(``tests/forge.py``); the other bench scripts mint with :func:`encode` and
:func:`typical_payload` too. ``cryptography`` is imported only for
asymmetric keys (the free-threaded 3.13t run has none). Every case also
carries the tokens a lane must reject.

Run as a script, it writes the fixtures as JSON (read by the Python workers,
the Rust binary and the JavaScript lanes).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
import forge

from grelmicro.jwt._demo import AUDIENCE, ISSUER, canonical_payload

KID = "k1"
DEFAULT_MAX_TOKEN = 8192
BIG_MAX_TOKEN = 65536

# (case name, algorithm, key name, payload size, suite)
ALG_CASES = [
    ("HS256", "HS256", "hs-32", "typical", "algs"),
    ("RS256", "RS256", "rsa-2048", "typical", "algs"),
    ("PS256", "PS256", "rsa-2048", "typical", "algs"),
    ("ES256", "ES256", "p-256", "typical", "algs"),
    ("EdDSA", "EdDSA", "ed25519", "typical", "algs"),
]
EXTRA_CASES = [
    ("HS512", "HS512", "hs-64", "typical", "algs-extra"),
    ("RS512", "RS512", "rsa-2048", "typical", "algs-extra"),
    ("RS256 RSA-3072", "RS256", "rsa-3072", "typical", "algs-extra"),
    ("RS256 RSA-4096", "RS256", "rsa-4096", "typical", "algs-extra"),
    ("ES384", "ES384", "p-384", "typical", "algs-extra"),
    ("ES512", "ES512", "p-521", "typical", "algs-extra"),
]
SIZE_ALGS = [("HS256", "hs-32"), ("RS256", "rsa-2048"), ("ES256", "p-256")]
SIZES = {"1KB": 1024, "8KB": 8192, "20KB": 20480}
SECRET_CASES = [
    ("HS256 secret 64 B", "HS256", "hs-64", "typical", "secrets"),
    ("HS256 secret 256 B", "HS256", "hs-256", "typical", "secrets"),
]


def typical_payload(now: int) -> dict:
    """The canonical payload (shared/bench-token.md): the product's demo holds it."""
    return canonical_payload(now)


def sized_payload(now: int, size: str) -> dict:
    payload = typical_payload(now)
    if size == "typical":
        return payload
    target = SIZES[size]
    perms: list[str] = []
    payload["permissions"] = perms
    while len(forge.json_bytes(payload)) < target:
        perms.append(f"https://api.example.com/permissions/items/{len(perms):04d}:read")
    return payload


def make_keys() -> dict:
    """Private keys by name, plus a second key of each kind for wrong-key tokens."""
    keys: dict = {}
    for name, size in (("hs-32", 32), ("hs-64", 64), ("hs-256", 256)):
        keys[name] = secrets.token_bytes(size)
        keys[name + "/other"] = secrets.token_bytes(size)
    for bits in (2048, 3072, 4096):
        keys[f"rsa-{bits}"] = forge.generate("RS256", rsa_bits=bits)
    keys["rsa-2048/other"] = forge.generate("RS256")
    keys["rsa-3072/other"] = keys["rsa-2048/other"]
    keys["rsa-4096/other"] = keys["rsa-2048/other"]
    for name, alg in (("p-256", "ES256"), ("p-384", "ES384"), ("p-521", "ES512")):
        keys[name] = forge.generate(alg)
        keys[name + "/other"] = forge.generate(alg)
    keys["ed25519"] = forge.generate("EdDSA")
    keys["ed25519/other"] = forge.generate("EdDSA")
    return keys


def encode(alg: str, key: object, payload: dict, kid: str = KID) -> str:
    """The canonical bench token: header ``{"alg", "typ", "kid"}`` over ``payload``."""
    return forge.Signer(alg, key, kid, "JWT").mint(payload)


def public_material(name: str, key: object) -> dict:
    """Every form of the public key a lane may need."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415

    if isinstance(key, bytes):
        return {
            "kind": "hmac",
            "secret_b64": base64.b64encode(key).decode(),
            "jwk": forge.jwk(key, kid=KID),
            "raw_b64": base64.b64encode(key).decode(),
        }
    pub = key.public_key()
    if isinstance(pub, rsa.RSAPublicKey):
        raw = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.PKCS1)
        kind = "rsa"
    elif isinstance(pub, ec.EllipticCurvePublicKey):
        raw = pub.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        kind = "ec"
    else:
        raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        kind = "okp"
    return {
        "kind": kind,
        "pem": forge.spki_pem(pub).decode(),
        "jwk": forge.jwk(pub, kid=KID, use="sig"),
        "raw_b64": base64.b64encode(raw).decode(),
        "bits": getattr(pub, "key_size", None),
        "name": name,
    }


def build_case(name: str, alg: str, key_name: str, size: str, suite: str, keys: dict, now: int):
    key = keys[key_name]
    other = keys[key_name + "/other"]
    payload = sized_payload(now, size)
    expired = dict(payload, iat=now - 7200, nbf=now - 7200, exp=now - 3600)
    immature = dict(payload, nbf=now + 3600, exp=now + 7200)
    wrong_aud = dict(payload, aud="https://other.example.com")
    valid = encode(alg, key, payload)
    head, _, sig = valid.split(".")
    tokens = {
        "valid": valid,
        "expired": encode(alg, key, expired),
        "not_yet_valid": encode(alg, key, immature),
        "wrong_aud": encode(alg, key, wrong_aud),
        "tampered": forge.tamper(valid),
        "wrong_key": encode(alg, other, payload),
        "unknown_kid": encode(alg, other, payload, kid="k9"),
        "malformed": f"{head}.e30*.{sig}",
    }
    return {
        "name": name,
        "suite": suite,
        "alg": alg,
        "key": key_name,
        "size": size,
        "payload": payload,
        "payload_bytes": len(forge.json_bytes(payload)),
        "token_bytes": len(valid),
        "max_token_size": DEFAULT_MAX_TOKEN if len(valid) <= DEFAULT_MAX_TOKEN else BIG_MAX_TOKEN,
        "tokens": tokens,
    }


def build(now: int | None = None) -> dict:
    now = int(time.time()) if now is None else now
    keys = make_keys()
    cases = [build_case(*spec, keys=keys, now=now) for spec in ALG_CASES + EXTRA_CASES]
    for alg, key_name in SIZE_ALGS:
        cases.extend(
            build_case(f"{alg} {size}", alg, key_name, size, "sizes", keys, now) for size in SIZES
        )
    cases.extend(build_case(*spec, keys=keys, now=now) for spec in SECRET_CASES)
    public = {name: public_material(name, k) for name, k in keys.items() if "/" not in name}
    return {
        "now": now,
        "audience": AUDIENCE,
        "issuer": ISSUER,
        "kid": KID,
        "keys": public,
        "cases": cases,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    data = build()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1))
    print(f"fixtures: {len(data['cases'])} cases -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
