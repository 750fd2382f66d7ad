"""grelmicro.jwt.testing: the test issuer's tokens, keys, JWKS, transport and server.

Its tokens are checked by the verifier AND by PyJWT (an independent
implementation), so a bug shared by the issuer and the verifier cannot hide.
"""

from __future__ import annotations

import sys

import httpx
import jwt as pyjwt
import pytest
from forge import NOW

from grelmicro.jwt import (
    ConfigurationError,
    ExpiredTokenError,
    InvalidAudienceError,
    InvalidSignatureError,
    JWTVerifier,
    MissingClaimError,
    UnknownKeyError,
    access_token_profile,
    unverified_header,
)
from grelmicro.jwt.testing import ALGORITHMS as ISSUER_ALGORITHMS
from grelmicro.jwt.testing import AUDIENCE, ISSUER, SUBJECT, TestIssuer

#: PyJWT names EdDSA keys "EdDSA" only.
PYJWT = {alg for alg in ISSUER_ALGORITHMS if alg != "Ed25519"}


@pytest.fixture(scope="module")
def es256() -> TestIssuer:
    return TestIssuer(clock=lambda: NOW)


@pytest.mark.parametrize("algorithm", ISSUER_ALGORITHMS)
def test_each_algorithm_mints_tokens_its_verifier_and_pyjwt_accept(algorithm: str) -> None:
    issuer = TestIssuer(algorithm)  # type: ignore[arg-type]
    token = issuer.mint(scope="orders:read")

    claims = issuer.verifier().verify(token)

    assert claims.subject == SUBJECT
    assert claims.scopes == {"orders:read"}
    assert unverified_header(token) == {"alg": algorithm, "typ": "JWT", "kid": "test-key-1"}
    if algorithm in PYJWT:
        key = issuer.secret if algorithm.startswith("HS") else issuer.private_key.public_key()
        decoded = pyjwt.decode(token, key, algorithms=[algorithm], audience=AUDIENCE)
        assert decoded == dict(claims)


def test_default_claims(es256: TestIssuer) -> None:
    first, second = es256.claims(), es256.claims()

    assert {k: v for k, v in first.items() if k != "jti"} == {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": SUBJECT,
        "iat": NOW,
        "exp": NOW + 300,
    }
    assert len(first["jti"]) == 32
    assert first["jti"] != second["jti"]


def test_claims_override_defaults_and_none_removes_one(es256: TestIssuer) -> None:
    token = es256.mint({"header": "a claim named like a parameter"}, sub="alice", jti=None)
    claims = es256.verifier().verify(token)

    assert claims["sub"] == "alice"
    assert claims["header"] == "a claim named like a parameter"
    assert "jti" not in claims


def test_a_removed_required_claim_is_refused(es256: TestIssuer) -> None:
    verifier = es256.verifier(required=["exp", "sub"])

    with pytest.raises(MissingClaimError):
        verifier.verify(es256.mint(sub=None))


def test_scope_lists_and_sets_become_rfc_strings(es256: TestIssuer) -> None:
    assert es256.claims(scope=["b:write", "a:read"])["scope"] == "b:write a:read"
    assert es256.claims(scope={"b", "a"})["scope"] == "a b"


def test_issuer_wide_claims_and_audience_lists() -> None:
    issuer = TestIssuer(audience=["one", "two"], claims={"tenant": "t1"})

    claims = issuer.verifier().verify(issuer.mint())

    assert claims["tenant"] == "t1"
    assert claims.audience == ("one", "two")


def test_header_overrides(es256: TestIssuer) -> None:
    renamed = es256.mint(header={"kid": "someone-else"})
    without_typ = es256.mint(header={"typ": None})
    access_token = es256.mint(header={"typ": "at+jwt"}, client_id="c1")

    with pytest.raises(UnknownKeyError):
        es256.verifier().verify(renamed)
    assert unverified_header(without_typ) == {"alg": "ES256", "kid": "test-key-1"}
    profile = es256.verifier(config=access_token_profile(audience=AUDIENCE, issuer=ISSUER))
    assert profile.verify(access_token)["client_id"] == "c1"


def test_expired_tokens_are_refused_with_their_time(es256: TestIssuer) -> None:
    with pytest.raises(ExpiredTokenError) as refused:
        es256.verifier().verify(es256.expired(ago=120))
    assert refused.value.expires_at is not None
    assert refused.value.expires_at.timestamp() == NOW - 120

    with pytest.raises(ExpiredTokenError):
        es256.verifier().verify(es256.mint(expires_in=-1))


def test_the_verifier_keeps_its_policy(es256: TestIssuer) -> None:
    verifier = es256.verifier(audience="https://another.test")

    with pytest.raises(InvalidAudienceError):
        verifier.verify(es256.mint())


def test_bearer_gives_an_authorization_header(es256: TestIssuer) -> None:
    headers = es256.bearer(scope="orders:write", roles=["admin"])

    scheme, token = headers["Authorization"].split(" ")
    claims = es256.verifier().verify(token)
    assert scheme == "Bearer"
    assert claims.scopes == {"orders:write"}
    assert claims["roles"] == ("admin",)


def test_another_test_issuer_is_not_trusted(es256: TestIssuer) -> None:
    stranger = TestIssuer()  # same kid, another key

    with pytest.raises(InvalidSignatureError):
        es256.verifier().verify(stranger.mint())


def test_rotation_publishes_the_new_key_and_keeps_the_old_one() -> None:
    issuer = TestIssuer()
    old = issuer.mint()

    kid = issuer.rotate()
    new = issuer.mint()

    assert kid == "test-key-2"
    assert [key["kid"] for key in issuer.jwks["keys"]] == ["test-key-1", "test-key-2"]
    verifier = issuer.verifier()
    assert verifier.verify(old)
    assert verifier.verify(new)
    issuer.rotate(keep=False)
    with pytest.raises(UnknownKeyError):
        issuer.verifier().verify(old)


def test_transport_serves_discovery_and_jwks() -> None:
    issuer = TestIssuer()
    client = httpx.Client(transport=issuer.transport())
    verifier = JWTVerifier(discover=issuer.issuer, audience=AUDIENCE, client=client)

    with verifier:
        claims = verifier.verify(issuer.mint())

    assert claims.issuer == ISSUER
    assert client.get(issuer.jwks_url).json() == issuer.jwks
    assert client.get(issuer.issuer + "other").status_code == 404


def test_loopback_server_serves_the_current_jwks() -> None:
    issuer = TestIssuer("EdDSA")
    with issuer.serve() as server:
        assert server.url.startswith("http://127.0.0.1:")
        verifier = JWTVerifier(
            jwks_url=server.jwks_url,
            allow_insecure_loopback=True,
            issuer=issuer.issuer,
            audience=AUDIENCE,
        )
        with verifier:
            assert verifier.verify(issuer.mint()).subject == SUBJECT
        discovery = httpx.get(server.discovery_url).json()
        assert discovery["jwks_uri"] == server.jwks_url
        assert server.requests == 2
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.jwks_url)


def test_an_hmac_issuer_has_a_secret_and_no_jwks() -> None:
    issuer = TestIssuer("HS256")

    assert len(issuer.secret) == 32
    for publish in (lambda: issuer.jwks, issuer.transport, lambda: issuer.serve().__enter__()):
        with pytest.raises(ConfigurationError, match="publishes no JWKS"):
            publish()
    with pytest.raises(ConfigurationError, match="not a secret"):
        _ = TestIssuer().secret


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"algorithm": "none"}, "TestIssuer signs with one of"),
        ({"issuer": ""}, "issuer must be a non-empty string"),
        ({"lifetime": "300"}, "lifetime must be a number"),
        ({"claims": {"when": object()}}, "JSON values only"),
    ],
)
def test_bad_settings_are_configuration_errors(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TestIssuer(**arguments)  # type: ignore[arg-type]


def test_claims_that_are_not_json_are_refused(es256: TestIssuer) -> None:
    with pytest.raises(ConfigurationError, match="JSON values only"):
        es256.mint(when=object())


def test_without_cryptography_asymmetric_keys_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == "cryptography"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "cryptography", None)

    with pytest.raises(ConfigurationError, match=r"pip install 'grelmicro\[jwt,testing\]'"):
        TestIssuer("ES256")
    hmac_issuer = TestIssuer("HS256")
    assert hmac_issuer.verifier().verify(hmac_issuer.mint()).subject == SUBJECT


def test_a_server_as_issuer_serves_discovery_for_itself() -> None:
    issuer = TestIssuer()
    with issuer.serve(as_issuer=True) as server:
        verifier = JWTVerifier(
            discover=server.issuer, allow_insecure_loopback=True, audience=AUDIENCE
        )
        with verifier:
            claims = verifier.verify(issuer.mint())
    assert claims.issuer == server.issuer
    assert server.issuer.startswith("http://127.0.0.1:")
    assert issuer.issuer == ISSUER  # restored after the block


@pytest.mark.anyio
async def test_transport_serves_an_async_client() -> None:
    issuer = TestIssuer("EdDSA")
    async with httpx.AsyncClient(transport=issuer.transport()) as http:
        verifier = JWTVerifier(
            jwks_url=issuer.jwks_url, issuer=ISSUER, audience=AUDIENCE, client=http
        )
        async with verifier:
            claims = await verifier.verify_async(issuer.mint())
    assert claims.subject == SUBJECT


def test_rotation_never_mixes_a_secret_with_key_pairs() -> None:
    issuer = TestIssuer()

    with pytest.raises(ConfigurationError, match="keep=False"):
        issuer.rotate("HS256")
    issuer.rotate("HS256", keep=False)
    assert issuer.verifier().verify(issuer.mint()).subject == SUBJECT
    with pytest.raises(ConfigurationError, match="signs with one of"):
        issuer.rotate("none")  # type: ignore[arg-type]
