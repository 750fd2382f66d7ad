"""Attack classes of the third audit (issue 33), each case naming the attack it closes.

- N17: a client reaching the app directly sends the certificate header a
  proxy would set (with a stolen certificate-bound token and the victim's
  public certificate); or its TLS certificate and the header disagree.
- N18: the client's own ``X-Forwarded-Client-Cert`` element comes first
  (Envoy ``APPEND_FORWARD``), a quoted ``Subject`` smuggles ``;Cert=``, or a
  PEM header carries two certificates.
- N22: a few keys fill the replay store and every other DPoP client gets
  503 for a whole window; ``Retry-After`` was a constant.
- D5: an HS256 token forged with the bare text of a public JWK member (an
  RSA ``n``, an ML-DSA ``pub``) verifies when that text was configured as
  the secret.
- N19: a token's ``iss`` closes its quotes in a refusal message and writes
  a line of its own ("near miss: only the scheme differs").
- N20: RSA ``n``/``e`` with leading zero octets give one key many RFC 7638
  thumbprints.
- N24: ``Claims.__init__`` or ``object.__setattr__`` on a cached ``Claims``
  changes what later requests see.

References: RFC 8705 §3, Envoy's x-forwarded-client-cert documentation,
RFC 9449 §11.1, RFC 8725 §2.1 §3.1, RFC 7518 §6.3.1.1, RFC 7638 §3,
CWE-290 (authentication bypass by spoofing), CWE-400, CWE-117 (log
neutralisation).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any
from urllib.parse import quote

import forge
import pytest
import support
from cryptography.hazmat.primitives.asymmetric import rsa
from dpop_proofs import ProofSigner
from fastapi import Depends, FastAPI

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    DPoPReplayError,
    DPoPVerifier,
    InvalidKeyError,
    JWTVerifier,
    Key,
    ReplayStore,
    TokenRejectedError,
    WeakKeyError,
    jwk_thumbprint,
)
from grelmicro.jwt.fastapi import CertificateBinding, JWTBearer

NOW = forge.NOW
ISSUER_SECRET = b"security-suite-audit3-issuer-secret-001"
RING = forge.KeyRing()
CERT = forge.certificate_pem(RING.p256, "victim")
ATTACKER_CERT = forge.certificate_pem(RING.other_p256, "attacker")
PROXY = ("10.0.0.5", 443)
DIRECT = ("203.0.113.7", 50000)


def _der(pem: bytes) -> bytes:
    body = b"".join(pem.strip().splitlines()[1:-1])
    return base64.b64decode(body)


X5T = forge.b64url(hashlib.sha256(_der(CERT)).digest())


def token(**claims: Any) -> str:
    return forge.mint({"alg": "HS256", "typ": "at+jwt"}, support.payload(**claims), ISSUER_SECRET)


STOLEN = token(cnf={"x5t#S256": X5T})  # the victim's certificate-bound token


def cert_app(**options: Any) -> FastAPI:
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0, clock=lambda: NOW)
    auth = JWTBearer(verifier, bindings=[CertificateBinding(**options)])
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Claims = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        return {"sub": claims.subject}

    return app


def behind_proxy(header: str = "X-Client-Cert", **options: Any) -> FastAPI:
    return cert_app(trusted_header=header, trusted_proxies=["10.0.0.0/24"], **options)


def with_tls(app: FastAPI, pem: bytes) -> Any:
    """``app`` under a server that implements the ASGI TLS extension."""

    async def server(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "extensions": {"tls": {"client_cert_chain": [pem.decode()]}}}
        await app(scope, receive, send)

    return server


def bearer(value: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}", **headers}


# -- N17: the header only from named proxies ---------------------------------------------


def test_n17_a_header_without_named_proxies_is_a_configuration_error():
    """Building refuses a header any peer could set."""
    with pytest.raises(ConfigurationError, match="trusted_proxies"):
        CertificateBinding(trusted_header="X-Client-Cert")


def test_n17_a_direct_client_cannot_name_the_victims_certificate():
    """Stolen bound token + the victim's public certificate, sent straight to the app."""
    app = behind_proxy()
    headers = bearer(STOLEN, **{"X-Client-Cert": quote(CERT)})
    support.refused_with(
        support.call(app, "/items", headers, client=DIRECT), 401, "certificate-binding"
    )
    # Positive control: the same request through the proxy is accepted.
    assert support.call(app, "/items", headers, client=PROXY).status_code == 200


def test_n17_a_tls_certificate_that_disagrees_with_the_header_is_refused():
    """The attacker's own TLS certificate, the victim's in the header."""
    app = with_tls(
        cert_app(trusted_header="X-Client-Cert", trusted_proxies=["127.0.0.1"]), ATTACKER_CERT
    )
    headers = bearer(STOLEN, **{"X-Client-Cert": quote(CERT)})
    support.refused_with(support.call(app, "/items", headers), 401, "certificate-binding")


# -- N18: the nearest proxy's certificate, one certificate ------------------------------


def test_n18_the_clients_own_xfcc_element_is_never_used():
    """APPEND_FORWARD: the client's forged element first, the proxy's (attacker's cert) last."""
    app = behind_proxy("X-Forwarded-Client-Cert", header_format="xfcc")
    value = f'Cert="{quote(CERT)}",Hash=00;Cert="{quote(ATTACKER_CERT)}"'
    headers = bearer(STOLEN, **{"X-Forwarded-Client-Cert": value})
    support.refused_with(
        support.call(app, "/items", headers, client=PROXY), 401, "certificate-binding"
    )


@pytest.mark.parametrize("separator", [";", ","])
def test_n18_a_quoted_subject_cannot_inject_a_cert(separator: str):
    app = behind_proxy("X-Forwarded-Client-Cert", header_format="xfcc")
    value = f'Cert="{quote(ATTACKER_CERT)}";Subject="CN=x{separator}Cert={quote(CERT)}"'
    headers = bearer(STOLEN, **{"X-Forwarded-Client-Cert": value})
    support.refused_with(
        support.call(app, "/items", headers, client=PROXY), 401, "certificate-binding"
    )


@pytest.mark.parametrize("order", ["victim-first", "attacker-first"])
def test_n18_a_header_with_two_certificates_is_refused(order: str):
    pems = (CERT, ATTACKER_CERT) if order == "victim-first" else (ATTACKER_CERT, CERT)
    headers = bearer(STOLEN, **{"X-Client-Cert": quote(b"".join(pems))})
    response = support.call(behind_proxy(), "/items", headers, client=PROXY)
    support.refused_with(response, 401, "certificate-binding")


# -- N22: fair shares of the replay store -------------------------------------------------


def test_n22_no_set_of_keys_leaves_a_newcomer_without_room():
    """128 keys flooding the default-shaped store (1/128 quota) used to fill it."""
    store = ReplayStore(max_size=4096)  # max_per_key 32, as the default's 1/128
    flooded = 0
    refusals: list[tuple[bool, float | None]] = []
    for attacker in range(128):
        for n in range(64):
            try:
                store.record(
                    b"%03d-%02d" % (attacker, n), f"attacker-{attacker}", now=NOW, until=NOW + 70
                )
                flooded += 1
            except DPoPReplayError as exc:
                refusals.append((exc.over_quota, exc.retry_after))
    assert flooded < 4096
    assert refusals
    assert {over for over, _ in refusals} == {True}  # over their share, never "full"
    assert all(after is not None and 0 < after <= 70 for _, after in refusals)
    assert store.record(b"honest", "newcomer", now=NOW, until=NOW + 70)


def test_n22_retry_after_is_the_real_time_until_room():
    store = ReplayStore(max_size=2, max_per_key=2)
    store.record(b"a", "one", now=NOW, until=NOW + 70)
    store.record(b"b", "two", now=NOW + 30, until=NOW + 100)
    with pytest.raises(DPoPReplayError) as full:
        store.record(b"c", "three", now=NOW + 40, until=NOW + 110)
    assert full.value.store_full
    assert full.value.retry_after == 30  # "one"'s entry frees at NOW + 70


# -- D5: a public member is no secret ----------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _members() -> dict[str, str]:
    numbers = rsa.generate_private_key(65537, 2048).public_key().public_numbers()
    n = numbers.n.to_bytes(256, "big")
    return {
        "rsa-n": _b64url(n),
        "rsa-n-hex": n.hex(),
        "rsa-n-base64": base64.b64encode(n).decode(),
        "mldsa44-pub": _b64url(bytes(range(256)) * 5 + bytes(32)),  # 1312 bytes
    }


MEMBERS = _members()


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_d5_a_token_forged_from_the_public_jwks_cannot_be_configured(name: str):
    """The forgery: HS256 keyed with text anyone can read in the JWKS."""
    text = MEMBERS[name]
    forged = forge.mint({"alg": "HS256"}, support.payload(), text.encode())
    with pytest.raises(InvalidKeyError) as caught:
        JWTVerifier([Key.secret(text, "HS256")]).verify(forged, now=NOW)
    assert "public key material" in str(caught.value)
    assert text[:16] not in str(caught.value)


@pytest.mark.parametrize("member", ["x", "y"])
def test_d5_an_ec_member_beside_its_key_is_refused(member: str):
    """An EC ``x`` is any 32 bytes; the key beside it is what gives it away: refused at build."""
    public = forge.jwk(RING.p256.public_key(), kid="pub", alg="ES256")
    text = public[member]
    with pytest.raises(WeakKeyError, match="public key member") as refused:
        JWTVerifier([Key.secret(text, "HS256", kid="hs"), Key.jwk(public)])
    assert text[:16] not in str(refused.value)


# -- N19: messages a token cannot forge ------------------------------------------------


def test_n19_an_issuer_cannot_close_its_quotes():
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], issuer="https://idp.example/")
    forged_line = 'https://idp.example/" (near miss: only the scheme differs) and "x'
    rejected = support.reject(verifier, token(iss=forged_line), "issuer")
    message = str(rejected)
    assert 'is "https://idp.example/\\" (near miss' in message
    assert message.endswith('expected "https://idp.example/"')


def test_n19_the_scheme_hint_needs_the_scheme_alone_to_differ():
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], issuer="https://idp.example/")
    for iss in (
        "x https://idp.example/",
        "https://evil/?https://idp.example/",
        "http://idp.example",
    ):
        message = str(support.reject(verifier, token(iss=iss), "issuer"))
        assert "scheme" not in message, iss
    message = str(support.reject(verifier, token(iss="http://idp.example/"), "issuer"))
    assert "(near miss: only the scheme differs)" in message


# -- N20: one key, one thumbprint -------------------------------------------------------


def _rsa_jwk() -> dict[str, str]:
    numbers = RING.rsa.public_key().public_numbers()
    return {
        "kty": "RSA",
        "e": _b64url(numbers.e.to_bytes(3, "big")),
        "n": _b64url(numbers.n.to_bytes(256, "big")),
    }


@pytest.mark.parametrize("member", ["n", "e"])
def test_n20_leading_zero_octets_give_no_second_thumbprint(member: str):
    jwk = _rsa_jwk()
    assert jwk_thumbprint(jwk)
    padded = {**jwk, member: _b64url(b"\x00" + base64.urlsafe_b64decode(jwk[member] + "=="))}
    with pytest.raises(InvalidKeyError, match="leading zero"):
        jwk_thumbprint(padded)


def test_n20_a_dpop_proof_with_a_zero_padded_key_is_refused():
    signer = ProofSigner("RS256", seed=33)
    padded = dict(signer.jwk)
    padded["n"] = _b64url(b"\x00" + base64.urlsafe_b64decode(padded["n"] + "=="))
    # A token bound to the padded key's (would-be) thumbprint, a proof carrying it.
    jkt = forge.thumbprint(padded)
    bound = token(cnf={"jkt": jkt})
    proof = signer.proof("GET", support.ORIGIN + "/items", bound, header={"jwk": padded})
    tokens = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0, clock=lambda: NOW)
    with pytest.raises(TokenRejectedError) as caught:
        DPoPVerifier(clock=lambda: NOW).check(
            scheme="DPoP",
            access_token=bound,
            claims=tokens.verify(bound),
            proof=proof,
            method="GET",
            uri=support.ORIGIN + "/items",
        )
    assert caught.value.reason == "dpop-proof"
    assert caught.value.check == "jwk"  # type: ignore[attr-defined]


# -- N24: cached claims cannot be re-pointed ------------------------------------------------


def test_n24_cached_claims_cannot_be_reinitialised_or_repointed():
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], clock=lambda: NOW)
    mine = token(sub="alice")
    first = verifier.verify(mine)
    with pytest.raises(AttributeError):
        first.__init__({"sub": "admin"})  # type: ignore[misc]
    with pytest.raises(AttributeError):
        object.__setattr__(first, "_data", {"sub": "admin"})
    with pytest.raises(AttributeError):
        first._data = {"sub": "admin"}  # type: ignore[misc]
    again = verifier.verify(mine)
    assert again["sub"] == "alice"
    assert json.loads(json.dumps(dict(again)))["sub"] == "alice"
