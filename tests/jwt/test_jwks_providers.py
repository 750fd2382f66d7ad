"""Provider quirks: JWKS and discovery documents shaped like the big providers'.

Each fixture below follows the members, order and quirks of a provider's
published documents (Entra ID v1 and v2 with the ``{tenantid}`` issuer
template, Auth0, Okta, Cognito, Keycloak, Google), written for these tests
with keys generated at test time; no provider document is copied. The
documents are served by a real server on 127.0.0.1.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from forge import NOW, Signer, b64url, certificate_builder, private_key
from servers import DocumentServer
from support import FakeClock, timed

from grelmicro.jwt import (
    FetchOptions,
    Issuer,
    JWTVerifier,
    KeyPendingError,
    KeysUnavailableError,
    TokenRejectedError,
)

FAST = FetchOptions(connect_timeout=1, read_timeout=1, total_timeout=2, jitter=0)
AUD = "api://orders"


def certificate_der(key: Signer) -> bytes:
    """A self-signed certificate over the key, as x5c carries it."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415

    now = datetime.datetime.now(datetime.timezone.utc)
    cert = certificate_builder(
        "accounts.test",
        key.private.public_key(),
        not_before=now - datetime.timedelta(days=1),
        not_after=now + datetime.timedelta(days=365),
    ).sign(key.private, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.DER)


def rsa_members(key: Signer) -> dict[str, str]:
    jwk = key.public_jwk()
    return {"n": jwk["n"], "e": jwk["e"]}


def with_cert(key: Signer) -> dict[str, Any]:
    der = certificate_der(key)
    return {
        "x5t": b64url(hashlib.sha1(der).digest()),  # x5t is a SHA-1 thumbprint
        "x5c": [base64.b64encode(der).decode()],
    }


def entra_v2(keys: list[Signer]) -> dict[str, Any]:
    # Entra ID: no "alg" on its keys, x5t/x5c, an "issuer" template per key.
    return {
        "keys": [
            {
                "kty": "RSA",
                "use": "sig",
                "kid": key.kid,
                **with_cert(key),
                **rsa_members(key),
                "cloud_instance_name": "microsoftonline.com",
                "issuer": "https://login.microsoftonline.com/{tenantid}/v2.0",
            }
            for key in keys
        ]
    }


def entra_v1(keys: list[Signer]) -> dict[str, Any]:
    document = entra_v2(keys)
    for jwk in document["keys"]:
        del jwk["issuer"]
    return document


def auth0(keys: list[Signer]) -> dict[str, Any]:
    return {
        "keys": [
            {
                "kty": "RSA",
                "use": "sig",
                **rsa_members(key),
                "kid": key.kid,
                **with_cert(key),
                "alg": "RS256",
            }
            for key in keys
        ]
    }


def okta(keys: list[Signer]) -> dict[str, Any]:
    return {
        "keys": [
            {"kty": "RSA", "alg": "RS256", "kid": key.kid, "use": "sig", **rsa_members(key)}
            for key in keys
        ]
    }


def cognito(keys: list[Signer]) -> dict[str, Any]:
    return {
        "keys": [
            {"alg": "RS256", **rsa_members(key), "kid": key.kid, "kty": "RSA", "use": "sig"}
            for key in keys
        ]
    }


def keycloak(keys: list[Signer]) -> dict[str, Any]:
    # Keycloak lists its encryption key (RSA-OAEP, use: enc) beside the signing keys.
    enc = private_key("RS256", seed=77)
    signing = [
        {
            "kid": key.kid,
            "kty": "RSA",
            "alg": "RS256",
            "use": "sig",
            **rsa_members(key),
            **with_cert(key),
            "x5t#S256": b64url(hashlib.sha256(certificate_der(key)).digest()),
        }
        for key in keys
    ]
    encryption = {"kid": "enc-1", "kty": "RSA", "alg": "RSA-OAEP", "use": "enc", **rsa_members(enc)}
    return {"keys": [*signing, encryption]}


def google(keys: list[Signer]) -> dict[str, Any]:
    return {
        "keys": [
            {**rsa_members(key), "use": "sig", "kty": "RSA", "alg": "RS256", "kid": key.kid}
            for key in keys
        ]
    }


PROVIDERS: dict[str, tuple[Callable[[list[Signer]], dict[str, Any]], str]] = {
    "entra-v2": (entra_v2, "https://login.microsoftonline.com/9188040d-6c67-4c5b/v2.0"),
    "entra-v1": (entra_v1, "https://sts.windows.net/9188040d-6c67-4c5b/"),
    "auth0": (auth0, "https://tenant.eu.auth0.com/"),
    "okta": (okta, "https://example.okta.com/oauth2/default"),
    "cognito": (cognito, "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbCdEf"),
    "keycloak": (keycloak, "https://sso.example.com/realms/shop"),
    "google": (google, "https://accounts.google.com"),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_each_provider_document_verifies_its_tokens(server: DocumentServer, provider: str) -> None:
    shape, iss = PROVIDERS[provider]
    keys = [private_key("RS256", kid=f"{provider}-{i}", seed=60 + i) for i in range(2)]
    server.set("/keys", shape(keys), headers={"Cache-Control": "public, max-age=86400"})
    verifier = JWTVerifier(
        jwks_url=server.url("/keys"),
        allow_insecure_loopback=True,
        issuer=iss,
        audience=AUD,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
    )
    for key in keys:
        claims = key.mint({"iss": iss, "aud": AUD, "sub": "u", "exp": NOW + 600})
        assert verifier.verify(claims)["iss"] == iss
    assert verifier.health().key_count == 2  # an enc key (Keycloak) is never a verifying key
    verifier.close()


def test_keycloak_encryption_key_never_verifies(server: DocumentServer) -> None:
    keys = [private_key("RS256", kid="sig-1", seed=60)]
    server.set("/keys", keycloak(keys))
    iss = PROVIDERS["keycloak"][1]
    verifier = JWTVerifier(
        jwks_url=server.url("/keys"), allow_insecure_loopback=True, issuer=iss, fetch=FAST
    )
    enc_signer = private_key("RS256", kid="enc-1", seed=77)
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(enc_signer.mint({"iss": iss, "exp": NOW + 600}), now=NOW)
    assert caught.value.reason == "unknown-key"
    verifier.close()


def test_odd_keys_are_skipped_and_the_rest_serve(server: DocumentServer) -> None:
    good = private_key("ES256", kid="good", seed=81)
    kidless = private_key("RS256", seed=82)
    kidless_jwk = kidless.public_jwk()
    del kidless_jwk["alg"]
    server.set(
        "/keys",
        {
            "keys": [
                {"kty": "FOO", "kid": "future", "x": "AAAA"},  # unknown kty
                {"kty": "OKP", "crv": "X25519", "kid": "ecdh", "x": b64url(b"\x09" * 32)},
                good.public_jwk(),
                good.public_jwk(),  # the same key twice
                kidless_jwk,  # no kid, no alg: RSA is taken as RS256
                {"kty": "RSA", "kid": "broken", "n": "AQAB"},  # missing e, tiny n
            ]
        },
    )
    verifier = JWTVerifier(jwks_url=server.url("/keys"), allow_insecure_loopback=True, fetch=FAST)
    assert verifier.verify(good.mint({"exp": NOW + 60}), now=NOW)
    assert verifier.verify(kidless.mint({"exp": NOW + 60}), now=NOW)
    assert verifier.health().key_count == 2
    verifier.close()


def test_entra_common_endpoint_names_a_template_not_an_issuer(server: DocumentServer) -> None:
    """Entra's ``common`` metadata says ``{tenantid}``: discovery without the template refuses it.

    The message says how to configure the template (``tests/jwt/test_tenants.py``
    covers it); listing each tenant as an issuer still works, and they share
    one JWKS URL and so one fetch.
    """
    common = server.url("/common/v2.0")
    server.set(
        "/common/v2.0/.well-known/openid-configuration",
        {
            "token_endpoint": server.url("/common/oauth2/v2.0/token"),
            "jwks_uri": server.url("/common/discovery/v2.0/keys"),
            "issuer": "https://login.microsoftonline.com/{tenantid}/v2.0",
            "id_token_signing_alg_values_supported": ["RS256"],
            "tenant_region_scope": None,
        },
    )
    key = private_key("RS256", kid="entra-1", seed=60)
    server.set("/common/discovery/v2.0/keys", entra_v2([key]))
    verifier = JWTVerifier(discover=common, allow_insecure_loopback=True, fetch=FAST)
    token = key.mint({"iss": common, "exp": NOW + 60})
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(token, now=NOW)
    # A configuration fault, not an outage: the message names both values.
    assert caught.value.wait == "config"
    assert 'names issuer "https://login.microsoftonline.com/{tenantid}/v2.0"' in str(caught.value)
    assert f'configured "{common}"' in str(caught.value)
    assert verifier.health().problem.startswith("configuration error: ")
    assert server.count("/common/discovery/v2.0/keys") == 0
    verifier.close()
    tenants = [f"https://login.microsoftonline.com/{t}/v2.0" for t in ("t-1", "t-2")]
    per_tenant = JWTVerifier(
        issuers=[
            Issuer(
                t,
                jwks_url=server.url("/common/discovery/v2.0/keys"),
                allow_insecure_loopback=True,
            )
            for t in tenants
        ],
        audience=AUD,
        fetch=FAST,
    )
    for tenant in tenants:
        token = key.mint({"iss": tenant, "aud": AUD, "exp": NOW + 60})
        assert per_tenant.verify(token, now=NOW)["iss"] == tenant
    assert server.count("/common/discovery/v2.0/keys") == 1  # one fetch for both tenants
    per_tenant.close()


def test_discovery_shaped_like_each_provider(server: DocumentServer) -> None:
    key = private_key("RS256", kid="d-1", seed=60)
    for path, extra in (
        ("/realms/shop", {"end_session_endpoint": "x", "grant_types_supported": ["password"]}),
        ("/oauth2/default", {"scopes_supported": ["openid"], "claims_supported": ["sub"]}),
        ("/eu-west-1_AbCdEf", {"subject_types_supported": ["public"]}),
    ):
        issuer = server.url(path)
        server.set(
            path + "/.well-known/openid-configuration",
            {"issuer": issuer, "jwks_uri": server.url(path + "/jwks"), **extra},
        )
        server.set(path + "/jwks", okta([key]))
        verifier = JWTVerifier(discover=issuer, allow_insecure_loopback=True, fetch=FAST)
        assert verifier.verify(key.mint({"iss": issuer, "exp": NOW + 60}), now=NOW)
        verifier.close()


def test_kidless_tokens_and_duplicate_kids_in_a_fetched_jwks(server: DocumentServer) -> None:
    only = private_key("ES256", kid="only", seed=91)
    server.set("/one", {"keys": [only.public_jwk()]})
    one = JWTVerifier(jwks_url=server.url("/one"), allow_insecure_loopback=True, fetch=FAST)
    kidless = only.with_kid(None)
    assert one.verify(kidless.mint({"exp": NOW + 60}), now=NOW)  # one key: accepted
    one.close()

    twin = private_key("ES256", kid="only", seed=92)
    other = private_key("RS256", kid="other", seed=93)
    server.set("/two", {"keys": [only.public_jwk(), twin.public_jwk(), other.public_jwk()]})
    clock = FakeClock()  # key timing: the test moves it
    two = JWTVerifier(
        jwks_url=server.url("/two"), allow_insecure_loopback=True, fetch=timed(FAST, clock)
    )
    assert two.verify(other.mint({"exp": NOW + 60}), now=NOW)
    # A kid two keys claim is unusable. A token arriving after the document
    # held was fetched gets its final answer from one fetched after it: one
    # refetch, then 401; within the unknown-kid pace (one a second), the
    # next such token gets 503 key-pending (never 401) until another fetch
    # may start.
    clock.now += 2
    with pytest.raises(TokenRejectedError):
        two.verify(only.mint({"exp": NOW + 60}), now=NOW)
    assert server.count("/two") == 2
    clock.now += 0.5
    for signer in (twin, kidless):
        with pytest.raises(KeyPendingError) as caught:
            two.verify(signer.mint({"exp": NOW + 60}), now=NOW)
        assert caught.value.retry_after == 0.5
    assert server.count("/two") == 2
    two.close()
