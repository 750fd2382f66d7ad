"""The module-level helpers and the error contract of the core."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import forge
import grelmicro_core
import pytest
from grelmicro_core import CoreError, Key, KeySet, Policy, Verifier
from support import FRESH, NOW, error_of, hs256, key_for, kind_of, verifier


@pytest.mark.parametrize(
    "data",
    [b"", b"abc", "abc", "é🙂", "eyJhbGciOiJIUzI1NiJ9.e30.sig", b"\x00\xff" * 1000, "x" * 100_000],
)
def test_sha256_digest_matches_hashlib(data: str | bytes) -> None:
    raw = data.encode("utf-8") if isinstance(data, str) else data

    digest = grelmicro_core.sha256_digest(data)

    assert type(digest) is bytes
    assert digest == hashlib.sha256(raw).digest()


def test_sha256_digest_str_and_bytes_agree() -> None:
    token = forge.signer("HS256").mint(FRESH)

    assert grelmicro_core.sha256_digest(token) == grelmicro_core.sha256_digest(token.encode())


@pytest.mark.parametrize("data", [1, None, bytearray(b"abc"), ["a"]])
def test_sha256_digest_refuses_other_types(data: object) -> None:
    assert kind_of(grelmicro_core.sha256_digest, data) == "malformed"


def test_unverified_header_returns_every_member_without_verifying() -> None:
    token = forge.signer("ES256").mint(
        FRESH, kid="k1", typ="at+jwt", x5u="https://x", ext={"a": [1]}
    )
    head, payload, _ = token.split(".")
    forged = f"{head}.{payload}.{forge.b64url(b'not a signature')}"

    header = grelmicro_core.unverified_header(forged)

    assert type(header) is dict
    assert header["alg"] == "ES256"
    assert header["kid"] == "k1"
    assert header["typ"] == "at+jwt"
    assert header["x5u"] == "https://x"
    assert header["ext"]["a"] == (1,)
    assert grelmicro_core.unverified_header(token.encode()) == header


DUPLICATE_ALG = '{"alg":"HS256","alg":"HS256"}'


@pytest.mark.parametrize(
    ("token", "options", "expected"),
    [
        ("a.b", {}, "malformed"),
        ("a.b.c", {}, "malformed"),
        (f"{forge.segment({'alg': 'none'})}.{forge.segment(FRESH)}.", {}, "malformed"),
        (f"{forge.segment({'alg': 'none'})}.{forge.segment(FRESH)}.c2ln", {}, "algorithm"),
        (f"{forge.segment({'alg': 'HS256', 'crit': ['x']})}.e30.c2ln", {}, "unsupported"),
        (forge.segment(DUPLICATE_ALG) + ".e30.c2ln", {}, "malformed"),
        (f"{forge.segment({'alg': 'HS256'})}.e30.c2ln", {"max_token_size": 20}, "too-large"),
        ("x" * 8193, {}, "too-large"),
        (f"{forge.segment({'alg': 'HS256'})}.e30.c2ln", {}, "ok"),
    ],
)
def test_unverified_header_applies_the_header_rules(
    token: str, options: dict[str, Any], expected: str
) -> None:
    assert kind_of(grelmicro_core.unverified_header, token, **options) == expected


def test_error_kinds_are_unique_kebab_case() -> None:
    kinds = grelmicro_core.error_kinds()

    assert len(kinds) == len(set(kinds))
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", kind) for kind in kinds)
    assert {
        "malformed", "too-large", "unsupported", "algorithm", "unknown-key", "signature",
        "expired", "not-yet-valid", "issued-in-future", "too-old", "audience", "issuer",
        "missing-claim", "invalid-claim", "type", "invalid-key", "weak-key", "invalid-config",
    } <= set(kinds)  # fmt: skip


def test_algorithms_are_the_closed_set() -> None:
    assert grelmicro_core.algorithms() == [
        *forge.HMAC_ALGORITHMS,
        *forge.RSA_ALGORITHMS,
        *forge.EC_ALGORITHMS,
        *forge.EDDSA_ALGORITHMS,
        *forge.MLDSA_ALGORITHMS,
    ]
    assert "none" not in [name.lower() for name in grelmicro_core.algorithms()]


def test_core_error_shape() -> None:
    exc = error_of(Key.secret, b"short", "HS256")

    assert isinstance(exc, Exception)
    assert type(exc) is CoreError
    kind, message = exc.args
    assert kind == "weak-key"
    assert kind in grelmicro_core.error_kinds()
    assert isinstance(message, str)


def test_objects_are_frozen() -> None:
    key = Key.secret(b"k" * 32, "HS256", "kid")
    check = verifier(key)

    with pytest.raises(AttributeError):
        key.kid = "other"  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        check.algorithms = ["RS256"]  # type: ignore[misc]
    assert key.kid == "kid"


def test_version_is_exposed() -> None:
    assert grelmicro_core.__version__ == "0.9.0"
    assert re.fullmatch(r"[0-9a-f]{16}", grelmicro_core.SOURCE_HASH)
    assert set(grelmicro_core.__all__) <= set(dir(grelmicro_core))


# ---------------------------------------------------------------------------
# Messages never quote the token, its signature, claim values or key material
# ---------------------------------------------------------------------------

SECRET = b"secret-sentinel-" + b"S" * 32
SENTINEL = "sentinel"
PAYLOAD = {
    "sub": "sub-sentinel",
    "aud": "aud-sentinel",
    "iss": "iss-sentinel",
    "exp": NOW + 60,
    "custom": "payload-sentinel",
}


def _forbidden(token: str) -> list[str]:
    """Substrings that must never appear in a message about ``token``."""
    parts = [token, *[p for p in token.split(".") if len(p) >= 6]]
    signature = token.rsplit(".", 1)[-1]
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    return [*parts, raw.hex(), SECRET.decode(), SECRET.hex(), forge.b64url(SECRET), SENTINEL]


def _leak_cases() -> list[tuple[str, dict[str, Any], str]]:
    """(token, policy, expected kind): one case per kind a token can earn."""
    sig = forge.Signer("HS256", SECRET)

    def t(payload: Any = None, **header: Any) -> str:
        return sig.mint(PAYLOAD if payload is None else payload, kid="kid-sentinel", **header)

    good = t()
    head, body, mac = good.split(".")
    flipped = mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1]
    aud = {"audience": ["aud-sentinel"]}
    return [
        (f"{head}.{body}.{flipped}", aud, "signature"),
        (f"{head}.{body}.{mac}=", aud, "malformed"),
        (f"{head}.{body}x.{mac}", aud, "malformed"),  # payload base64 is checked first
        (t({**PAYLOAD, "exp": NOW - 1}), aud, "expired"),
        (t({**PAYLOAD, "nbf": NOW + 99}), aud, "not-yet-valid"),
        (t({**PAYLOAD, "iat": NOW + 99}), aud, "issued-in-future"),
        (t({**PAYLOAD, "iat": NOW - 999}), {**aud, "max_age": 5}, "too-old"),
        (t(), {"audience": ["other"]}, "audience"),
        (t(), {}, "audience"),
        (t(), {**aud, "issuer": ["other"]}, "issuer"),
        (t(), {**aud, "required": ["exp", "tenant-sentinel"]}, "missing-claim"),
        (t({**PAYLOAD, "sub": 5, "custom": "payload-sentinel"}), aud, "invalid-claim"),
        (t(typ="typ-sentinel"), {**aud, "typ": "at+jwt"}, "type"),
        (t(crit=["crit-sentinel"]), aud, "unsupported"),
        (t(alg="HS384"), aud, "algorithm"),
        (t('{"custom":"payload-sentinel","custom":"payload-sentinel"}'), aud, "malformed"),
        (t({**PAYLOAD, "deep": [[[["payload-sentinel"]]]]}), {**aud, "max_depth": 3}, "too-large"),
        (good, {**aud, "max_token_size": 64}, "too-large"),
    ]


@pytest.mark.parametrize(("token", "policy", "expected"), _leak_cases())
def test_rejection_messages_never_quote_the_token(
    token: str, policy: dict[str, Any], expected: str
) -> None:
    check = Verifier(KeySet([Key.secret(SECRET, "HS256", "kid-sentinel")]), Policy(**policy))
    required = policy.get("required", [])

    kind, message = error_of(check.verify, token, NOW).args

    assert kind == expected
    for needle in _forbidden(token):
        if needle == SENTINEL and any(SENTINEL in name for name in required):
            continue  # the configured claim name is the policy's, not the token's
        assert needle not in message, (kind, message)


def test_unknown_key_message_does_not_quote_the_kid() -> None:
    sig, check = hs256("kid-a")

    kind, message = error_of(check.verify, sig.mint(FRESH, kid="kid-sentinel"), NOW).args

    assert kind == "unknown-key"
    assert SENTINEL not in message


def _pem_body(pem: bytes) -> str:
    return "".join(pem.decode().splitlines()[1:-1])[:40]


def _build_errors() -> list[tuple[Callable[[], Any], list[str]]]:
    """Build-time refusals with the key material they must not echo."""
    rsa_private = forge.signer("RS256").private
    private_pem = forge.private_pem(rsa_private)
    ec_private_jwk = forge.private_jwk(forge.signer("ES256").private)
    oct_jwk = forge.oct_jwk(SECRET, "HS512")
    return [
        (lambda: Key.secret(SECRET[:20], "HS256"), [SECRET[:20].decode()]),
        (lambda: Key.secret(SECRET, "RS256"), [SECRET.decode()]),
        (lambda: Key.pem(private_pem, "RS256"), [_pem_body(private_pem)]),
        (
            lambda: Key.pem(private_pem.replace(b"PRIVATE", b"PUBLIC"), "RS256"),
            [_pem_body(private_pem)],
        ),
        (lambda: Key.jwk(json.dumps(ec_private_jwk)), [ec_private_jwk["d"], ec_private_jwk["x"]]),
        (lambda: Key.jwk(json.dumps(oct_jwk)), [oct_jwk["k"]]),
        (lambda: Key.jwk(json.dumps(oct_jwk), allow_symmetric=True), [oct_jwk["k"]]),
        (
            lambda: Key.jwk(
                json.dumps(oct_jwk | {"alg": "HS256", "k": "k-sentinel!"}), allow_symmetric=True
            ),
            ["k-sentinel"],
        ),
        (lambda: Key.jwk('{"kty":"RSA","n":"n-sentinel","e":"AQAB"}'), ["n-sentinel"]),
    ]


@pytest.mark.parametrize(("build", "needles"), _build_errors())
def test_build_errors_never_quote_key_material(
    build: Callable[[], Any], needles: list[str]
) -> None:
    kind, message = error_of(build).args

    assert kind in {"invalid-key", "weak-key"}
    for needle in needles:
        assert needle not in message, message


def test_jwks_skip_reasons_never_quote_key_material() -> None:
    private = forge.private_jwk(forge.signer("ES256").private) | {"kid": "p"}
    document = json.dumps({"keys": [forge.signer("ES384").jwk(kid="ok"), private]})

    skipped = {kid: reason for kid, _, reason in KeySet.from_jwks(document).skipped}

    assert set(skipped) == {"p"}
    assert private["d"] not in skipped["p"]
    assert private["x"] not in skipped["p"]


def test_key_repr_shows_no_material() -> None:
    key = Key.secret(SECRET, "HS256", "k")
    pem_key = key_for(forge.signer("RS256"), "r")

    assert SECRET.decode() not in repr(key)
    assert forge.b64url(SECRET) not in repr(key)
    assert "HS256" in repr(key)
    assert _pem_body(forge.spki_pem(forge.signer("RS256").private)) not in repr(pem_key)
