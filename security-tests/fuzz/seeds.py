"""Write the seed corpora of both fuzzers (run once; the output is committed).

    python security-tests/fuzz/seeds.py

Writes ``grelmicro-core/fuzz/seeds/verify/`` (tokens for the fixed key set of
``support.fuzz_verifiers`` and ``fuzz_targets/verify.rs``: valid ones for
each policy, and one of each hostile shape) and
``grelmicro-core/fuzz/seeds/jwks/`` (JWKS documents and single JWKs). The
atheris harness reads the ``verify`` seeds too.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.append(str(HERE.parents[1] / "tests"))  # the one token forge

import forge  # noqa: E402
import support  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

OUT = HERE.parents[1] / "grelmicro-core" / "fuzz" / "seeds"
NOW = forge.NOW


def _tokens() -> list[bytes]:
    hs = support.FUZZ_HS256_SECRET
    es = forge.ec_key_from_scalar(support.FUZZ_ES256_SCALAR, ec.SECP256R1())
    good = {"sub": "u", "aud": "fuzz-aud", "iss": "fuzz-iss", "exp": NOW + 60}
    strict = {"sub": "u", "tenant": "t", "exp": NOW + 60, "iat": NOW - 5}
    out = [
        forge.mint({"alg": "HS256", "kid": "hs"}, good, hs),
        forge.mint(
            {"alg": "HS256", "kid": "hs", "typ": "JWT"}, {**good, "aud": ["x", "fuzz-aud"]}, hs
        ),
        forge.mint({"alg": "ES256", "kid": "es"}, good, es),
        forge.mint({"alg": "ES256", "kid": "es", "typ": "at+jwt"}, strict, es),
        forge.mint({"alg": "ES256", "kid": "es", "typ": "at+jwt"}, {**strict, "x": [[1]]}, es),
        forge.mint({"alg": "HS256", "kid": "hs"}, {**good, "exp": NOW - 60}, hs),
        forge.mint({"alg": "HS256", "kid": "hs"}, {**good, "nbf": NOW + 600}, hs),
        forge.mint({"alg": "HS256", "kid": "hs"}, {**good, "aud": "other"}, hs),
        forge.mint({"alg": "HS256", "kid": "hs"}, {**good, "exp": "soon"}, hs),
        forge.mint({"alg": "HS256", "kid": "es"}, good, hs),
        forge.mint({"alg": "HS256", "kid": "hs", "crit": ["x"]}, good, hs),
        forge.mint({"alg": "HS256", "kid": "hs", "b64": False}, good, hs),
        forge.mint(b'{"alg":"HS256","kid":"hs","kid":"hs"}', good, hs, "HS256"),
        forge.mint({"alg": "HS256", "kid": "hs"}, b'{"exp":1,"exp":2}', hs, "HS256"),
        forge.mint(
            {"alg": "HS256", "kid": "hs"}, b'{"exp":' + b"[" * 70 + b"]" * 70 + b"}", hs, "HS256"
        ),
        forge.mint(
            {"alg": "HS256", "kid": "hs"}, b'{"exp":1e400,"x":"\\ud83d\\ude00"}', hs, "HS256"
        ),
        forge.unsigned({"alg": "none"}, good),
        forge.unsigned({"alg": "ES256", "kid": "es"}, good, bytes(64)),
        "a.b.c.d.e",
        "eyJhbGciOiJIUzI1NiJ9.e30",
    ]
    return [t.encode() for t in out]


def _jwks() -> list[bytes]:
    es = forge.ec_key_from_scalar(support.FUZZ_ES256_SCALAR, ec.SECP256R1())
    rsa_key = rsa.generate_private_key(65537, 2048)
    ed = forge.KeyRing().ed25519
    docs = [
        {"keys": [support.FUZZ_ES256_JWK]},
        {"keys": [forge.jwk(rsa_key.public_key(), kid="r", alg="RS256", use="sig")]},
        {"keys": [forge.jwk(ed.public_key(), kid="d")]},
        {"keys": [forge.oct_jwk(support.FUZZ_HS256_SECRET, kid="s")]},
        {"keys": [forge.private_jwk(es, kid="p"), {**support.FUZZ_ES256_JWK, "use": "enc"}]},
        {
            "keys": [
                support.FUZZ_ES256_JWK,
                {**support.FUZZ_ES256_JWK, "x": forge.b64url(bytes(32))},
            ]
        },
        {
            "keys": [
                {**support.FUZZ_ES256_JWK, "key_ops": ["sign"]},
                {"kty": "RSA", "n": "AQAB", "e": "AQAB"},
            ]
        },
    ]
    out = [json.dumps(d).encode() for d in docs]
    out.append(json.dumps(support.FUZZ_ES256_JWK).encode())
    out.append(json.dumps(forge.jwk(rsa_key.public_key(), alg="PS256")).encode())
    return out


def main() -> None:
    for name, items in (("verify", _tokens()), ("jwks", _jwks())):
        target = OUT / name
        target.mkdir(parents=True, exist_ok=True)
        for item in items:
            (target / hashlib.sha1(item).hexdigest()).write_bytes(item)
        print(f"{target}: {len(items)} seeds")


if __name__ == "__main__":
    main()
