"""Command line: ``python -m grelmicro.jwt {demo,verify,inspect}``.

- ``demo``: builds keys, mints tokens and shows what the verifier accepts,
  what it refuses and why, and what the cache saves. Needs ``cryptography``
  for the public-key algorithms (HS256 works without it).
- ``verify``: verifies a token (argument or stdin) against a secret (from an
  environment variable, never an argument), a PEM file or a JWKS file.
- ``inspect``: prints a token's header WITHOUT verifying it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grelmicro.jwt import (
    JWTError,
    JWTVerifier,
    Key,
    TokenRejectedError,
    unverified_header,
)

__all__ = ["main"]

AUDIENCE = "https://api.example.com"
ISSUER = "https://issuer.example.com/"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _compact(header: dict[str, Any], payload: dict[str, Any]) -> bytes:
    head = _b64(json.dumps(header, separators=(",", ":")).encode())
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    return f"{head}.{body}".encode()


def _mint_hs256(secret: bytes, header: dict[str, Any], payload: dict[str, Any]) -> str:
    signing_input = _compact({"alg": "HS256", **header}, payload)
    tag = hmac.new(secret, signing_input, hashlib.sha256).digest()
    return f"{signing_input.decode()}.{_b64(tag)}"


def _public_key_demos() -> list[tuple[str, Key, Callable[[dict[str, Any]], str]]]:
    """RS256, ES256 and EdDSA keys and signers, when ``cryptography`` is installed."""
    try:
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import (  # noqa: PLC0415
            ec,
            ed25519,
            padding,
            rsa,
        )
        from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
            decode_dss_signature,
        )
    except ImportError:
        return []

    def pem(public: Any) -> bytes:
        result: bytes = public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return result

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = ed25519.Ed25519PrivateKey.generate()

    def sign_rs256(payload: dict[str, Any]) -> str:
        data = _compact({"alg": "RS256", "typ": "JWT", "kid": "rsa-1"}, payload)
        sig = rsa_key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        return f"{data.decode()}.{_b64(sig)}"

    def sign_es256(payload: dict[str, Any]) -> str:
        data = _compact({"alg": "ES256", "typ": "JWT", "kid": "ec-1"}, payload)
        r, s = decode_dss_signature(ec_key.sign(data, ec.ECDSA(hashes.SHA256())))
        return f"{data.decode()}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def sign_eddsa(payload: dict[str, Any]) -> str:
        data = _compact({"alg": "EdDSA", "typ": "JWT", "kid": "ed-1"}, payload)
        return f"{data.decode()}.{_b64(ed_key.sign(data))}"

    return [
        ("RS256", Key.pem(pem(rsa_key.public_key()), "RS256", kid="rsa-1"), sign_rs256),
        ("ES256", Key.pem(pem(ec_key.public_key()), "ES256", kid="ec-1"), sign_es256),
        ("EdDSA", Key.pem(pem(ed_key.public_key()), "EdDSA", kid="ed-1"), sign_eddsa),
    ]


def _outcome(verifier: JWTVerifier, token: str | bytes, now: float | None = None) -> str:
    try:
        claims = verifier.verify(token, now=now)
    except TokenRejectedError as exc:
        return f"REJECTED  reason={exc.reason:<16} {exc}"
    return f"accepted  sub={claims.subject} scopes={sorted(claims.scopes)}"


def _time_per_call(call: Callable[[], object], rounds: int = 5, number: int = 2000) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            call()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e9


def demo() -> int:
    """Run the demo on embedded defaults; returns the exit code."""
    now = int(time.time())
    payload = {
        "iss": ISSUER,
        "sub": "user-1234567890",
        "aud": AUDIENCE,
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "jti": "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f",
        "scope": "read:items write:items",
        "email": "jane.doe@example.com",
        "name": "Jane Doe",
        "roles": ["admin", "user"],
    }
    secret = secrets.token_bytes(32)
    keys = [Key.secret(secret, "HS256", kid="hs-1")]
    signers: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("HS256", lambda p: _mint_hs256(secret, {"typ": "JWT", "kid": "hs-1"}, p))
    ]
    for name, key, sign in _public_key_demos():
        keys.append(key)
        signers.append((name, sign))
    verifier = JWTVerifier(keys, audience=AUDIENCE, issuer=ISSUER)
    print(f"grelmicro.jwt demo: {verifier!r}")
    print(f"keys: {', '.join(repr(k) for k in keys)}\n")

    print("Valid tokens, one per algorithm:")
    for name, sign in signers:
        print(f"  {name:<6} {_outcome(verifier, sign(payload))}")

    good = signers[0][1](payload)
    head, body, sig = good.split(".")
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    unsecured = _b64(b'{"alg":"none"}')
    cases: list[tuple[str, str | bytes, float | None]] = [
        ("expired (now = exp)", good, float(now + 3600)),
        ("not yet valid", signers[0][1]({**payload, "nbf": now + 600}), None),
        ("wrong audience", signers[0][1]({**payload, "aud": "https://other.example"}), None),
        ("wrong issuer", signers[0][1]({**payload, "iss": "https://evil.example/"}), None),
        ("tampered signature", f"{head}.{body}.{flipped}", None),
        ("alg none", f"{unsecured}.{body}.", None),
        ("unknown kid", _mint_hs256(secret, {"kid": "nope"}, payload), None),
        ("not a token", "hello", None),
        ("too large", "a" * 10_000, None),
    ]
    print("\nRefusals (each names a stable reason):")
    for label, token, at in cases:
        print(f"  {label:<20} {_outcome(verifier, token, at)}")

    raw = good.encode()
    uncached = JWTVerifier(keys, audience=AUDIENCE, issuer=ISSUER, cache_size=0)
    miss = _time_per_call(lambda: uncached.verify(raw.decode()))
    hit = _time_per_call(lambda: verifier.verify(raw.decode()))
    print(
        f"\nHS256 on this machine: full verification {miss:,.0f} ns, "
        f"cache hit {hit:,.0f} ns (best of 5 x 2000, token decoded from bytes each call)"
    )
    return 0


def _read_token(value: str | None) -> str:
    if value is None or value == "-":
        return sys.stdin.read().strip()
    return value


def verify_command(args: argparse.Namespace) -> int:
    """Verify one token; print its claims (exit 0) or the refusal (exit 1)."""
    keys: list[Key] = []
    jwks = None
    if args.secret_env:
        secret = os.environ.get(args.secret_env)
        if secret is None:
            print(f"environment variable {args.secret_env} is not set", file=sys.stderr)
            return 2
        keys.append(Key.secret(secret, args.algorithm or "HS256", kid=args.kid))
    if args.pem:
        keys.append(Key.pem(Path(args.pem).read_bytes(), args.algorithm or "RS256", kid=args.kid))
    if args.jwks:
        jwks = Path(args.jwks).read_bytes()
    try:
        verifier = JWTVerifier(
            keys or None,
            jwks=jwks,
            audience=args.audience,
            issuer=args.issuer,
            leeway=args.leeway,
            cache_size=0,
        )
        claims = verifier.verify(_read_token(args.token))
    except TokenRejectedError as exc:
        print(f"rejected: {exc.reason}: {exc}", file=sys.stderr)
        return 1
    except JWTError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(claims.to_dict(), indent=2, sort_keys=True))
    return 0


def inspect_command(args: argparse.Namespace) -> int:
    """Print the header of a token without verifying it."""
    try:
        header = unverified_header(_read_token(args.token))
    except JWTError as exc:
        print(f"not a token: {exc}", file=sys.stderr)
        return 1
    print("UNVERIFIED header:")
    print(json.dumps(header, indent=2, sort_keys=True, default=list))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m grelmicro.jwt`` and ``grelmicro-jwt``."""
    parser = argparse.ArgumentParser(prog="grelmicro-jwt", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="show the verifier at work on generated keys")
    check = commands.add_parser("verify", help="verify a token")
    check.add_argument("token", nargs="?", help="the token, or - / nothing for stdin")
    check.add_argument("--secret-env", help="name of an env var holding the HMAC secret")
    check.add_argument("--pem", help="path of a PEM public key or certificate")
    check.add_argument("--jwks", help="path of a JWKS document")
    check.add_argument("--algorithm", help="algorithm of --secret-env/--pem keys")
    check.add_argument("--kid", help="kid of the --secret-env/--pem key")
    check.add_argument("--audience", action="append", help="accepted audience (repeatable)")
    check.add_argument("--issuer", action="append", help="accepted issuer (repeatable)")
    check.add_argument("--leeway", type=float, default=0.0, help="clock skew in seconds")
    peek = commands.add_parser("inspect", help="print a token's header without verifying")
    peek.add_argument("token", nargs="?", help="the token, or - / nothing for stdin")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    if args.command == "verify":
        return verify_command(args)
    return inspect_command(args)
