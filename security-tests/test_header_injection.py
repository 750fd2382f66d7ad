"""Header injection: the token trying to choose its own key or rules.

Attack class: key material or key locations carried in the header (``jwk``,
``jku``, ``x5u``, ``x5c``), hostile ``kid`` values (path traversal, NUL,
SQL, huge, non-string; duplicated in a JWKS), ``crit`` listing extensions
the verifier does not implement, ``b64: false``, duplicate header members
(a parser differential between the verifier and whoever logs or routes).

References:
- CVE-2018-0114 (node-jose trusted the embedded ``jwk``);
- RFC 7515 §4.1.2-4.1.6 (``jku``, ``jwk``, ``kid``, ``x5u``, ``x5c``) and
  RFC 8725 §3.10 ("do not trust received claims": ``kid`` injection, SSRF
  through ``jku``/``x5u``);
- RFC 7515 §4.1.11 (``crit``: unknown extensions make the JWS invalid; an
  empty list is not allowed);
- RFC 7797 §3 and §6 (``b64: false`` changes what is signed);
- RFC 7515 §4 (header member names MUST be unique; reject duplicates);
- design.md §3 (two different keys under one ``kid`` make it unusable).
"""

from __future__ import annotations

import base64
import socket
import zlib

import forge
import pytest
from support import accept, key_for, mint, payload, reject, verifier_for

from grelmicro.jwt import ConfigurationError, JWTVerifier


def test_embedded_jwk_is_not_used(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "RS256")
    attacker = ring.other_rsa
    for header in (
        {"alg": "RS256", "jwk": forge.jwk(attacker.public_key())},
        {"alg": "RS256", "jwk": forge.jwk(attacker.public_key(), kid="k"), "kid": "k"},
    ):
        reject(verifier, forge.mint(header, payload(sub="admin"), attacker, "RS256"), "signature")


def test_embedded_jwk_of_another_family(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "RS256")
    header = {"alg": "ES256", "jwk": forge.jwk(ring.other_p256.public_key())}
    reject(verifier, forge.mint(header, payload(), ring.other_p256, "ES256"), "algorithm")
    attacker_secret = b"attacker-chosen-secret-0123456789"
    header = {"alg": "HS256", "jwk": forge.oct_jwk(attacker_secret)}
    reject(verifier, forge.mint(header, payload(), attacker_secret, "HS256"), "algorithm")


def test_embedded_oct_jwk_beside_an_hmac_key(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    attacker_secret = b"attacker-chosen-secret-0123456789"
    header = {"alg": "HS256", "jwk": forge.oct_jwk(attacker_secret)}
    reject(verifier, forge.mint(header, payload(), attacker_secret, "HS256"), "signature")


@pytest.fixture
def listener() -> socket.socket:
    """A loopback socket that records whether anyone connected to it."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def _connected(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("member", ["jku", "x5u"])
def test_key_urls_are_never_fetched(
    ring: forge.KeyRing, listener: socket.socket, member: str
) -> None:
    port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}/jwks.json"
    verifier = verifier_for(ring, "RS256")
    header = {"alg": "RS256", member: url, "kid": "attacker"}
    reject(verifier, forge.mint(header, payload(), ring.other_rsa, "RS256"), "signature")
    # The same header on a genuine token: accepted, and still nothing fetched.
    accept(verifier, forge.mint(header, payload(), ring.rsa, "RS256"))
    assert not _connected(listener)


def test_x5c_chain_is_not_trusted(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "RS256")
    cert_pem = forge.certificate_pem(ring.other_rsa, "attacker")
    der = base64.b64decode(b"".join(cert_pem.splitlines()[1:-1]))
    header = {"alg": "RS256", "x5c": [base64.b64encode(der).decode()], "x5t#S256": "AAAA"}
    reject(verifier, forge.mint(header, payload(), ring.other_rsa, "RS256"), "signature")


HOSTILE_KIDS = [
    "../../../../../../dev/null",
    "/dev/null",
    "..\\..\\windows\\win.ini",
    "file:///etc/passwd",
    "k1\u0000",
    "\u0000",
    "k1' OR '1'='1",
    "x' UNION SELECT 'c2VjcmV0' --",
    "k1; DROP TABLE keys",
    "${jndi:ldap://127.0.0.1/a}",
    "%s%s%s%n",
    "{0}{1}",
    "k1\r\nX-Injected: 1",
    "K1",
    "k1 ",
    " k1",
    "k\u0131",
    "\uff4b\uff11",  # fullwidth "k1"
    "",
    "k" * 4096,
]


@pytest.mark.parametrize("kid", HOSTILE_KIDS, ids=lambda k: repr(k)[:40])
def test_hostile_kid_matches_nothing(ring: forge.KeyRing, kid: str) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "HS256", "k1")], cache_size=0)
    accept(verifier, mint(ring, "HS256", {"alg": "HS256", "kid": "k1"}))
    # Even correctly signed with the only key, a foreign kid names no key.
    token = forge.mint({"alg": "HS256", "kid": kid}, payload(), ring.hs256, "HS256")
    reject(verifier, token, "unknown-key")


@pytest.mark.parametrize("kid", HOSTILE_KIDS[:12], ids=lambda k: repr(k)[:40])
def test_hostile_kid_with_a_kidless_key_is_only_a_hint(ring: forge.KeyRing, kid: str) -> None:
    # A kid-less key treats the token's kid as a hint: the signature decides.
    verifier = verifier_for(ring, "HS256")
    attacker = b"attacker-chosen-secret-0123456789"
    reject(
        verifier,
        forge.mint({"alg": "HS256", "kid": kid}, payload(), attacker, "HS256"),
        "signature",
    )


def test_huge_kid_is_too_large(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "HS256", "k1")], cache_size=0)
    token = forge.mint({"alg": "HS256", "kid": "k" * 100_000}, payload(), ring.hs256, "HS256")
    reject(verifier, token, "too-large")


@pytest.mark.parametrize("kid", [1, 0, None, True, [], ["k1"], {}, {"kid": "k1"}, 1.5], ids=repr)
def test_non_string_kid(ring: forge.KeyRing, kid: object) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "HS256", "k1")], cache_size=0)
    reject(
        verifier,
        forge.mint({"alg": "HS256", "kid": kid}, payload(), ring.hs256, "HS256"),
        "malformed",
    )


def _es256(key: object, kid: str | None) -> str:
    header = {"alg": "ES256"} if kid is None else {"alg": "ES256", "kid": kid}
    return forge.mint(header, payload(), key, "ES256")


def _duplicate_kid_jwks(ring: forge.KeyRing) -> dict[str, object]:
    """Two P-256 keys under the kid ``dup``, and an RSA key under ``rsa``."""
    return {
        "keys": [
            forge.jwk(ring.p256.public_key(), kid="dup"),
            forge.jwk(ring.other_p256.public_key(), kid="dup"),
            forge.jwk(ring.rsa.public_key(), kid="rsa"),
        ]
    }


def test_duplicate_kid_in_a_jwks_makes_it_unusable(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(jwks=_duplicate_kid_jwks(ring), cache_size=0)
    for key in (ring.p256, ring.other_p256):
        reject(verifier, _es256(key, "dup"), "unknown-key")
    accept(verifier, mint(ring, "RS256", {"alg": "RS256", "kid": "rsa"}))


def test_the_same_key_twice_under_one_kid_is_harmless(ring: forge.KeyRing) -> None:
    twice = forge.jwk(ring.p256.public_key(), kid="same")
    verifier = JWTVerifier(jwks={"keys": [twice, dict(twice)]}, cache_size=0)
    accept(verifier, mint(ring, "ES256", {"alg": "ES256", "kid": "same"}))


def test_duplicate_kid_in_code_is_a_build_error(ring: forge.KeyRing) -> None:
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier(keys=[key_for(ring, "HS256", "k"), key_for(ring, "HS512", "k")])
    assert caught.value.reason == "invalid-config"


def test_duplicate_kid_across_keys_and_jwks_is_unusable(ring: forge.KeyRing) -> None:
    # Issue 10: with keys= and jwks= combined the first JWKS entry silently won.
    from grelmicro.jwt import Key  # noqa: PLC0415

    in_code = Key.pem(forge.spki_pem(ring.p256.public_key()), "ES256", kid="dup")
    document = {
        "keys": [
            forge.jwk(ring.other_p256.public_key(), kid="dup"),
            forge.jwk(ring.rsa.public_key(), kid="rsa"),
        ]
    }
    verifier = JWTVerifier(keys=[in_code], jwks=document, cache_size=0)
    for key in (ring.p256, ring.other_p256):
        reject(verifier, _es256(key, "dup"), "unknown-key")
    accept(verifier, mint(ring, "RS256", {"alg": "RS256", "kid": "rsa"}))


def test_duplicate_kid_inside_a_jwks_stays_unusable_beside_keys(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(
        keys=[key_for(ring, "HS256", "hs")], jwks=_duplicate_kid_jwks(ring), cache_size=0
    )
    for key in (ring.p256, ring.other_p256):
        reject(verifier, _es256(key, "dup"), "unknown-key")


def test_duplicate_kid_through_rotate_is_unusable(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "RS256", "rsa")], cache_size=0)
    verifier.rotate(keys=[key_for(ring, "RS256", "rsa")], jwks=_duplicate_kid_jwks(ring))
    for key in (ring.p256, ring.other_p256):
        reject(verifier, _es256(key, "dup"), "unknown-key")


def test_kidless_token_and_a_one_key_jwks(ring: forge.KeyRing) -> None:
    # design.md §3: a token without kid takes the only key that could verify it.
    one = JWTVerifier(jwks={"keys": [forge.jwk(ring.p256.public_key(), kid="k")]}, cache_size=0)
    accept(one, _es256(ring.p256, None))
    reject(one, _es256(ring.other_p256, None), "signature")
    two = JWTVerifier(
        jwks={
            "keys": [
                forge.jwk(ring.p256.public_key(), kid="k"),
                forge.jwk(ring.other_p256.public_key(), kid="k2"),
            ]
        },
        cache_size=0,
    )
    reject(two, _es256(ring.p256, None), "unknown-key")


def test_token_without_kid_and_two_candidate_keys(ring: forge.KeyRing) -> None:
    other = b"another-hs256-secret-for-the-suite-01"
    from grelmicro.jwt import Key  # noqa: PLC0415

    verifier = JWTVerifier(keys=[key_for(ring, "HS256"), Key.secret(other, "HS256")], cache_size=0)
    reject(verifier, mint(ring, "HS256", {"alg": "HS256"}), "unknown-key")


@pytest.mark.parametrize(
    ("crit", "reason"),
    [
        (["x-custom"], "unsupported"),
        (["b64"], "unsupported"),
        (["exp"], "unsupported"),
        (["alg"], "unsupported"),
        (["x-custom", 1], "unsupported"),
        ([], "malformed"),
        ("x-custom", "malformed"),
        ([1], "malformed"),
        ([None], "malformed"),
        ([["x"]], "malformed"),
        (None, "malformed"),
        ({}, "malformed"),
        (True, "malformed"),
    ],
    ids=repr,
)
def test_crit(ring: forge.KeyRing, crit: object, reason: str) -> None:
    verifier = verifier_for(ring, "HS256")
    header = {"alg": "HS256", "crit": crit, "x-custom": True}
    reject(verifier, forge.mint(header, payload(), ring.hs256, "HS256"), reason)


@pytest.mark.parametrize(
    ("b64", "reason"),
    [
        (False, "unsupported"),
        ("false", "malformed"),
        (0, "malformed"),
        (None, "malformed"),
        ([], "malformed"),
    ],
    ids=repr,
)
def test_b64_false_and_malformed(ring: forge.KeyRing, b64: object, reason: str) -> None:
    verifier = verifier_for(ring, "HS256")
    header = (
        {"alg": "HS256", "b64": b64, "crit": ["b64"]}
        if b64 is False
        else {"alg": "HS256", "b64": b64}
    )
    reject(verifier, forge.mint(header, payload(), ring.hs256, "HS256"), reason)


def test_b64_false_with_an_unencoded_payload(ring: forge.KeyRing) -> None:
    # RFC 7797: the signing input is header "." raw payload.
    verifier = verifier_for(ring, "HS256")
    header_seg = forge.segment({"alg": "HS256", "b64": False, "crit": ["b64"]})
    raw = b'{"sub":"admin","exp":9999999999}'
    mac = forge.sign("HS256", ring.hs256, header_seg.encode() + b"." + raw)
    reject(verifier, f"{header_seg}.{raw.decode()}.{forge.b64url(mac)}", "unsupported")
    reject(verifier, f"{header_seg}.{forge.b64url(raw)}.{forge.b64url(mac)}", "unsupported")


def test_b64_true_is_the_default_and_accepted(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    accept(verifier, forge.mint({"alg": "HS256", "b64": True}, payload(), ring.hs256, "HS256"))


# (header, reason): a member refused on its first occurrence is refused
# before its duplicate is seen; every other duplicate is malformed.
DUPLICATE_HEADERS = [
    (b'{"alg":"HS256","alg":"HS256"}', "malformed"),
    (b'{"alg":"HS256","alg":"none"}', "malformed"),
    (b'{"alg":"none","alg":"HS256"}', "algorithm"),
    (b'{"alg":"RS256","alg":"HS256"}', "malformed"),
    (b'{"alg":"HS256","\\u0061lg":"HS256"}', "malformed"),
    (b'{"alg":"HS256","kid":"k1","kid":"k2"}', "malformed"),
    (b'{"alg":"HS256","typ":"JWT","typ":"at+jwt"}', "malformed"),
    (b'{"alg":"HS256","crit":["x"],"crit":["x"]}', "unsupported"),
    (b'{"alg":"HS256","b64":true,"b64":true}', "malformed"),
    (b'{"alg":"HS256","x":1,"x":1}', "malformed"),
    (b'{"alg":"HS256","x":{"a":1,"a":2}}', "malformed"),
    (b'{"alg":"HS256","x":[{"a":1,"\\u0061":2}]}', "malformed"),
]


@pytest.mark.parametrize(
    ("header", "reason"), DUPLICATE_HEADERS, ids=[h.decode()[:48] for h, _ in DUPLICATE_HEADERS]
)
def test_duplicate_header_members(ring: forge.KeyRing, header: bytes, reason: str) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "HS256", "k1")], cache_size=0)
    if b'"kid"' not in header:
        verifier = verifier_for(ring, "HS256")
    reject(verifier, forge.mint(header, payload(), ring.hs256, "HS256"), reason)


def test_zip_header_never_inflates(ring: forge.KeyRing) -> None:
    # "zip" belongs to JWE; in a JWS it is an unknown member. A deflated
    # payload is not JSON and is refused, never decompressed.
    verifier = verifier_for(ring, "HS256")
    bomb = zlib.compress(b'{"exp":9999999999,"x":"' + b"A" * 1_000_000 + b'"}', 9)
    token = forge.mint({"alg": "HS256", "zip": "DEF"}, bomb, ring.hs256, "HS256")
    reject(verifier, token, "malformed")


def test_unknown_members_do_not_change_the_decision(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    header = {
        "alg": "HS256",
        "enc": "A256GCM",
        "cty": "JWT",
        "x5t": "AAAA",
        "jku": "https://attacker.invalid/jwks",
        "nested": {"alg": "none", "kid": "x"},
    }
    accept(verifier, forge.mint(header, payload(), ring.hs256, "HS256"))
    attacker = b"attacker-chosen-secret-0123456789"
    reject(verifier, forge.mint(header, payload(), attacker, "HS256"), "signature")
