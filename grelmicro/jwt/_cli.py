"""Command line: python -m grelmicro.jwt {demo,verify,inspect} (also grelmicro-jwt).

- demo: builds keys, mints tokens and shows what the verifier accepts,
  what it refuses and why, and what the cache saves. Needs cryptography
  for the public-key algorithms (HS256 works without it).
- verify: verifies a token (argument, or - / a pipe for stdin) against a
  secret (named by an environment variable, never given as an argument), a
  PEM file, a JWKS file, a JWKS URL or an issuer's OIDC discovery.
- inspect: prints a token's header and payload WITHOUT verifying anything,
  with its times in ISO 8601 and how long until it expires.

Errors are one line on stderr, never a traceback, and never echo a secret
or a token (argument errors included: values are not repeated).
Exit codes: 0 accepted, 1 token rejected, 2 usage or configuration error,
3 keys unavailable (a JWKS URL that cannot be fetched).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn, cast

from grelmicro.jwt import (
    ConfigurationError,
    JWTError,
    JWTVerifier,
    Key,
    KeysUnavailableError,
    TokenRejectedError,
    TokenTooLargeError,
    unverified_header,
)
from grelmicro.jwt._claims import _thaw
from grelmicro.jwt._config import AlgorithmName
from grelmicro.jwt._demo import (
    AUDIENCE,
    ISSUER,
    b64url,
    canonical_payload,
    mint_hs256,
    public_key_demos,
)

__all__ = ["main"]

#: Exit codes, one per outcome.
ACCEPTED, REJECTED, USAGE, UNAVAILABLE = 0, 1, 2, 3

#: What an environment variable name looks like. Even a name that fits is
#: never repeated in a message: a secret can look like one (upper-case hex).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

#: ``inspect`` shows a payload nested at most this deep (the verifier's default cap).
_MAX_DEPTH = 64

#: An authorization scheme pasted in front of the token (``Bearer``, ``DPoP``).
_SCHEME = re.compile(r"(?:authorization:\s*)?(?:bearer|dpop)\s+", re.IGNORECASE)


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
    payload = canonical_payload(now)
    secret = secrets.token_bytes(32)
    keys = [Key.secret(secret, "HS256", kid="hs-1")]
    signers: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("HS256", lambda p: mint_hs256(secret, p, typ="JWT", kid="hs-1"))
    ]
    for name, key, sign in public_key_demos():
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
    unsecured = b64url(b'{"alg":"none"}')
    cases: list[tuple[str, str | bytes, float | None]] = [
        ("expired (now = exp)", good, float(now + 3600)),
        ("not yet valid", signers[0][1]({**payload, "nbf": now + 600}), None),
        ("wrong audience", signers[0][1]({**payload, "aud": "https://other.example"}), None),
        ("wrong issuer", signers[0][1]({**payload, "iss": "https://evil.example/"}), None),
        ("tampered signature", f"{head}.{body}.{flipped}", None),
        ("alg none", f"{unsecured}.{body}.", None),
        ("unknown kid", mint_hs256(secret, payload, kid="nope"), None),
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


class _UsageError(Exception):
    """A one-line error with its exit code (raised inside the commands)."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def _read_token(value: str | None) -> str:
    if value is None and sys.stdin.isatty():
        raise _UsageError(
            "no token given: pass it as an argument, or pipe it in "
            "(echo $TOKEN | grelmicro-jwt verify -); see --help"
        )
    if value is None or value == "-":
        token = sys.stdin.read().strip()
        if not token:
            raise _UsageError("no token on standard input")
        return token
    return value


def _read_file(path: str, option: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        shown = path if len(path) <= 200 and path.isprintable() else "(the given path)"
        reason = exc.strerror or type(exc).__name__
        raise _UsageError(f"cannot read the {option} file {shown}: {reason}") from None


def _secret_from_env(name: str) -> str:
    # The value is never repeated: given by mistake, it may be the secret itself.
    if not _ENV_NAME.fullmatch(name):
        raise _UsageError(
            "--secret-env takes the NAME of an environment variable (such as JWT_SECRET) "
            "holding the secret, not the secret itself"
        )
    secret = os.environ.get(name)
    if secret is None:
        raise _UsageError(
            "the environment variable named by --secret-env is not set (the name is not "
            "repeated, in case it is the secret itself); --secret-env takes the NAME of "
            "a variable holding the secret"
        )
    return secret


def _build(args: argparse.Namespace) -> JWTVerifier:
    algorithm = cast("AlgorithmName | None", args.algorithm)
    keys: list[Key] = []
    if args.secret_env:
        keys.append(
            Key.secret(_secret_from_env(args.secret_env), algorithm or "HS256", kid=args.kid)
        )
    if args.pem:
        keys.append(Key.pem(_read_file(args.pem, "--pem"), algorithm or "RS256", kid=args.kid))
    jwks = _read_file(args.jwks, "--jwks") if args.jwks else None
    if args.jwks_url or args.discover:
        if keys or jwks is not None or (args.jwks_url and args.discover):
            raise _UsageError(
                "--jwks-url and --discover are key sources of their own: use one, without "
                "--secret-env, --pem or --jwks"
            )
        return JWTVerifier(
            jwks_url=args.jwks_url,
            discover=args.discover,
            allow_insecure_loopback=args.allow_insecure_loopback,
            audience=args.audience,
            issuer=args.issuer,
            leeway=args.leeway,
            leeway_ahead=args.leeway_ahead,
            cache_size=0,
        )
    if not keys and jwks is None:
        raise _UsageError(
            "no key given: pass --secret-env, --pem, --jwks, --jwks-url or --discover"
        )
    return JWTVerifier(
        keys or None,
        jwks=jwks,
        audience=args.audience,
        issuer=args.issuer,
        leeway=args.leeway,
        leeway_ahead=args.leeway_ahead,
        cache_size=0,
    )


def verify_command(args: argparse.Namespace) -> int:
    """Verify one token; print its claims (exit 0) or the refusal (exit 1)."""
    verifier = _build(args)
    try:
        claims = verifier.verify(_read_token(args.token))
    finally:
        verifier.close()
    print(json.dumps(claims.to_dict(), indent=2, sort_keys=True))
    return ACCEPTED


def _depth(value: object) -> int:
    """How deeply ``value`` nests arrays and objects (iteratively: no recursion limit)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > _MAX_DEPTH:
            break
        pending.extend((child, level + 1) for child in children)
    return deepest


def _payload(token: str) -> object:
    segments = token.split(".")
    if len(segments) != 3:
        return None
    try:
        raw = base64.urlsafe_b64decode(segments[1] + "=" * (-len(segments[1]) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    except RecursionError:
        payload = None
        deep = True
    else:
        deep = _depth(payload) > _MAX_DEPTH
    if deep:
        raise TokenTooLargeError(f"the payload is nested deeper than {_MAX_DEPTH} levels")
    return payload


def _span(seconds: float) -> str:
    """``3d 4h``, ``2h 5m``, ``4m 59s`` or ``12s``: the two largest units."""
    whole = int(abs(seconds))
    units = [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)]
    parts: list[str] = []
    for name, size in units:
        if whole >= size or (name == "s" and not parts):
            parts.append(f"{whole // size}{name}")
            whole %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def _times(payload: object, now: float) -> list[str]:
    """``exp``/``nbf``/``iat`` in ISO 8601 with how far they are from ``now``."""
    if not isinstance(payload, dict):
        return []
    lines = []
    for claim in ("iat", "nbf", "exp"):
        value = payload.get(claim)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        try:
            moment = datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            lines.append(f"  {claim}: {value!r} (not a time a calendar can show)")
            continue
        when = moment.isoformat().replace("+00:00", "Z")
        ahead = value - now
        if claim == "exp":
            note = f"expires in {_span(ahead)}" if ahead > 0 else f"expired {_span(ahead)} ago"
        elif claim == "nbf":
            note = f"valid in {_span(ahead)}" if ahead > 0 else f"valid since {_span(ahead)}"
        else:
            note = f"in {_span(ahead)}, in the future" if ahead > 0 else f"{_span(ahead)} ago"
        lines.append(f"  {claim}: {when} ({note})")
    return lines


def inspect_command(args: argparse.Namespace) -> int:
    """Print the header and payload of a token without verifying anything."""
    token = _SCHEME.sub("", _read_token(args.token).strip(), count=1).strip()
    header = _thaw(unverified_header(token))
    payload = _payload(token)
    print("UNVERIFIED: nothing below was checked (signature, expiry, issuer); do not trust it.")
    print("header:")
    print(json.dumps(header, indent=2, sort_keys=True, ensure_ascii=True))
    print("payload:")
    if payload is None:
        print("  (not readable as base64url JSON)")
    else:
        print(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=True))
    times = _times(payload, time.time())
    if times:
        print("times (UTC):")
        print("\n".join(times))
    return ACCEPTED


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    from grelmicro.jwt import _core  # noqa: PLC0415

    try:
        own = version("grelmicro")
    except PackageNotFoundError:  # pragma: no cover - a source checkout
        own = "unknown"
    return f"grelmicro-jwt {own} (grelmicro-core {_core.__version__})"


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors never repeat a value from the command line.

    A token or a secret given in the wrong place (an unknown option, a
    missing command) would otherwise be echoed back to the terminal.
    """

    #: The command line being parsed; its values are hidden from error messages.
    given: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        """Print the usage and the message with the command line's values hidden; exit 2."""
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {_hidden(message, self.given)}\n")


def _hidden(message: str, given: Sequence[str]) -> str:
    """``message`` without any value of ``given`` (option names and commands stay)."""
    if message.startswith("unrecognized arguments:"):
        return "unrecognized arguments (not repeated: they may hold a token or a secret)"
    for value in sorted(given, key=len, reverse=True):
        if value.startswith("-") and "=" in value:  # --option=value
            name = value.split("=", 1)[0]
            message = message.replace(value, f"{name}=(value not shown)")
        elif not value.startswith("-") and value not in _COMMANDS:
            message = message.replace(repr(value), "(a value, not shown)")
            if len(value) >= 8:
                message = message.replace(value, "(a value, not shown)")
    return message


_COMMANDS = ("demo", "verify", "inspect")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="grelmicro-jwt",
        description="Verify and inspect JWT bearer tokens with grelmicro.jwt.",
        epilog="Exit codes: 0 accepted, 1 token rejected, 2 usage or configuration error, "
        "3 keys unavailable.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "demo",
        help="show the verifier at work on generated keys",
        description="Build keys, mint tokens and show what is accepted, refused, and why.",
    )
    check = commands.add_parser(
        "verify",
        help="verify a token and print its claims",
        description="Verify a token and print its claims as JSON. The secret is read from "
        "an environment variable, never from the command line.",
    )
    check.add_argument("token", nargs="?", help="the token; - or a pipe reads standard input")
    check.add_argument(
        "--secret-env", metavar="NAME", help="environment variable holding the HMAC secret"
    )
    check.add_argument("--pem", metavar="FILE", help="PEM public key or certificate")
    check.add_argument("--jwks", metavar="FILE", help="JWKS document")
    check.add_argument("--jwks-url", metavar="URL", help="JWKS URL (https)")
    check.add_argument(
        "--discover",
        metavar="ISSUER",
        help="issuer URL: keys from its OpenID Connect discovery document, iss checked",
    )
    check.add_argument(
        "--allow-insecure-loopback",
        action="store_true",
        help="allow a plain-http --jwks-url/--discover on 127.0.0.1 / localhost (tests)",
    )
    check.add_argument("--algorithm", help="algorithm of the --secret-env/--pem key, e.g. RS256")
    check.add_argument("--kid", help="kid of the --secret-env/--pem key")
    check.add_argument("--audience", action="append", help="accepted audience (repeatable)")
    check.add_argument("--issuer", action="append", help="accepted issuer (repeatable)")
    check.add_argument(
        "--leeway",
        type=float,
        default=0.0,
        help="clock skew in seconds on every time rule, exp included (default 0)",
    )
    check.add_argument(
        "--leeway-ahead",
        type=float,
        default=60.0,
        help="clock skew in seconds allowed on nbf and iat ahead of now (default 60; "
        "the larger of this and --leeway applies)",
    )
    peek = commands.add_parser(
        "inspect",
        help="print a token's header and payload WITHOUT verifying",
        description="Decode a token's header and payload for reading, with its times in "
        "ISO 8601 and how long until it expires. Nothing is verified. A leading Bearer or "
        "DPoP scheme is dropped.",
    )
    peek.add_argument("token", nargs="?", help="the token; - or a pipe reads standard input")
    return parser


def _fail(message: str, code: int) -> int:
    # One line, whatever the message holds.
    print(message.replace("\n", " ").replace("\r", " "), file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m grelmicro.jwt`` and ``grelmicro-jwt``; returns the exit code."""
    _Parser.given = tuple(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    # Key-source warnings would add lines to a one-line answer; the error says it all.
    logging.getLogger("grelmicro.jwt").setLevel(logging.CRITICAL)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "demo": lambda _: demo(),
        "verify": verify_command,
        "inspect": inspect_command,
    }
    try:
        return commands[args.command](args)
    except (JWTError, _UsageError) as exc:
        return _fail(*_explain(exc))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _explain(exc: JWTError | _UsageError) -> tuple[str, int]:
    """The one-line message and exit code of a failure."""
    if isinstance(exc, _UsageError):
        return f"error: {exc}", exc.code
    if isinstance(exc, TokenRejectedError):
        return f"rejected: {exc.reason}: {exc}", REJECTED
    if isinstance(exc, KeysUnavailableError):
        if exc.wait == "config":  # not an outage: the configuration (or the provider's) is off
            return f"configuration error: {exc}", UNAVAILABLE
        return f"keys unavailable: {exc}", UNAVAILABLE
    if isinstance(exc, ConfigurationError):
        return f"error: {exc.reason}: {exc}", USAGE
    return f"error: {exc}", USAGE  # pragma: no cover - every JWTError is one of the above
