"""Provider presets (issue 39), tried as a new user would, against loopback providers.

One real server on 127.0.0.1 plays each provider: its metadata at the path
the provider serves it, its key set in the provider's shape (key members as
published: Entra's alg-less keys with ``x5c``, Keycloak's encryption key
beside its signing keys, ...), and tokens shaped as the provider issues them.
Each test also refuses the confusion that provider invites.
"""

from __future__ import annotations

from typing import Any

import pytest
from forge import NOW, Signer, private_key
from servers import DocumentServer
from test_jwks_providers import auth0 as auth0_keys
from test_jwks_providers import cognito as cognito_keys
from test_jwks_providers import entra_v2
from test_jwks_providers import google as google_keys
from test_jwks_providers import keycloak as keycloak_keys
from test_jwks_providers import okta as okta_keys

from grelmicro.jwt import (
    FetchOptions,
    GuestRejectedError,
    InvalidAudienceError,
    InvalidClaimError,
    InvalidIssuerError,
    Issuer,
    JWTVerifier,
    TenantRejectedError,
    providers,
)
from grelmicro.jwt.errors import TokenRejectedError

FAST = FetchOptions(connect_timeout=1, read_timeout=1, total_timeout=2, jitter=0)
T1 = "0f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f"
T2 = "7d1e9a20-5b3c-4f6d-8e9a-0b1c2d3e4f50"
LOOPBACK = {"allow_insecure_loopback": True}


@pytest.fixture
def key() -> Signer:
    return private_key("RS256", kid="k1", seed=90)


def metadata(server: DocumentServer, path: str, issuer: str, jwks_path: str) -> None:
    server.set(
        path.rstrip("/") + "/.well-known/openid-configuration",
        {"issuer": issuer, "jwks_uri": server.url(jwks_path), "response_types_supported": ["code"]},
    )


def entra_keys(key: Signer, base: str) -> dict[str, Any]:
    """Entra's key set shape, its per-key ``issuer`` on the loopback authority."""
    document = entra_v2([key])
    for member in document["keys"]:
        member["issuer"] = base + "/{tenantid}/v2.0"
    return document


def verifier(*issuers: Issuer) -> JWTVerifier:
    return JWTVerifier(issuers=list(issuers), fetch=FAST, clock=lambda: float(NOW))


def mint(key: Signer, **claims: Any) -> str:
    return key.mint({"exp": NOW + 600, "iat": NOW - 5, "nbf": NOW - 5, **claims})


def test_entra_single_tenant_v2_and_guests(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    server.set(f"/{T1}/discovery/v2.0/keys", entra_keys(key, base))
    auth = verifier(
        providers.entra(T1, audience="api://orders", authority=base, guests="refuse", **LOOPBACK)
    )
    iss = f"{base}/{T1}/v2.0"
    shaped = {"aud": "api://orders", "iss": iss, "tid": T1, "oid": "o", "ver": "2.0"}
    claims = auth.verify(mint(key, **shaped, scp="Orders.Read", acct=0))
    assert claims.tenant == T1
    with pytest.raises(GuestRejectedError):
        auth.verify(mint(key, **shaped, acct=1))
    with pytest.raises(TenantRejectedError):  # another tenant's token, same keys
        auth.verify(mint(key, **{**shaped, "iss": f"{base}/{T2}/v2.0", "tid": T2}))
    auth.close()


def test_entra_multitenant_by_common_metadata(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    metadata(server, "/organizations/v2.0", base + "/{tenantid}/v2.0", "/common/keys")
    server.set("/common/keys", entra_keys(key, base))
    auth = verifier(
        providers.entra_multitenant([T1, T2], audience="api://orders", authority=base, **LOOPBACK)
    )
    for tenant in (T1, T2):
        token = mint(key, aud="api://orders", iss=f"{base}/{tenant}/v2.0", tid=tenant)
        assert auth.verify(token).tenant == tenant
    auth.close()


def test_entra_b2c_policy_metadata_names_another_issuer(
    server: DocumentServer, key: Signer
) -> None:
    base = server.url("").rstrip("/")
    issuer = f"{base}/{T1}/v2.0/"
    metadata(server, "/contoso.onmicrosoft.com/B2C_1_signin/v2.0", issuer, "/b2c/keys")
    server.set("/b2c/keys", {"keys": [{**key.public_jwk(), "x5t": "b2c-thumbprint"}]})
    auth = verifier(
        providers.entra_b2c(
            "contoso", "B2C_1_signin", tenant_id=T1, audience="client-1", authority=base, **LOOPBACK
        )
    )
    claims = auth.verify(mint(key, iss=issuer, aud="client-1", tfp="B2C_1_signin", sub="u"))
    assert claims.issuer == issuer
    # Every user flow of the tenant shares the issuer and keys: the flow is the tfp claim.
    for other in ({"tfp": "B2C_1_passwordreset"}, {"tfp": "b2c_1_signin"}, {}):
        with pytest.raises(InvalidClaimError, match="tfp"):
            auth.verify(mint(key, iss=issuer, aud="client-1", sub="u", **other))
    auth.close()
    both = verifier(
        providers.entra_b2c(
            "contoso",
            "B2C_1_signin",
            tenant_id=T1,
            audience="client-1",
            authority=base,
            user_flows=["B2C_1_signin", "B2C_1_profileedit"],
            **LOOPBACK,
        )
    )
    assert both.verify(mint(key, iss=issuer, aud="client-1", tfp="B2C_1_profileedit", sub="u"))
    with pytest.raises(InvalidClaimError):
        both.verify(mint(key, iss=issuer, aud="client-1", tfp="B2C_1_passwordreset", sub="u"))
    both.close()


def test_auth0(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    metadata(server, "/", base + "/", "/.well-known/jwks.json")
    server.set("/.well-known/jwks.json", auth0_keys([key]))
    auth = verifier(providers.auth0(base, audience="https://api.example.com", **LOOPBACK))
    good = mint(key, iss=base + "/", aud=["https://api.example.com", base + "/userinfo"], azp="c")
    assert auth.verify(good)
    with pytest.raises(InvalidAudienceError):  # an ID token for the SPA, not for this API
        auth.verify(mint(key, iss=base + "/", aud="spa-client-id"))
    auth.close()


def test_okta_custom_authorization_server(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    metadata(server, "/oauth2/default", base + "/oauth2/default", "/oauth2/default/v1/keys")
    server.set("/oauth2/default/v1/keys", okta_keys([key]))
    auth = verifier(providers.okta(base, audience="api://default", **LOOPBACK))
    assert auth.verify(mint(key, iss=base + "/oauth2/default", aud="api://default", cid="c"))
    with pytest.raises(InvalidIssuerError):  # the org authorization server's token
        auth.verify(mint(key, iss=base, aud="api://default"))
    auth.close()


def test_keycloak_realm_refuses_another_realm(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    realm = base + "/realms/shop"
    metadata(server, "/realms/shop", realm, "/realms/shop/protocol/openid-connect/certs")
    server.set("/realms/shop/protocol/openid-connect/certs", keycloak_keys([key]))
    auth = verifier(providers.keycloak(base, "shop", audience="orders-api", **LOOPBACK))
    shaped = {"aud": "orders-api", "realm_access": {"roles": ["reader"]}, "azp": "web"}
    assert auth.verify(mint(key, iss=realm, **shaped))
    with pytest.raises(InvalidIssuerError):
        auth.verify(mint(key, iss=base + "/realms/other", **shaped))
    assert server.count("/realms/other/.well-known/openid-configuration") == 0
    auth.close()


def test_cognito_access_tokens_refuse_id_tokens(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    pool = "eu-west-1_AbCdEf123"
    metadata(server, "/" + pool, f"{base}/{pool}", f"/{pool}/.well-known/jwks.json")
    server.set(f"/{pool}/.well-known/jwks.json", cognito_keys([key]))
    access = providers.cognito(pool, client_id="app-client", authority=base, **LOOPBACK)
    auth = verifier(access)
    iss = f"{base}/{pool}"
    assert auth.verify(mint(key, iss=iss, token_use="access", client_id="app-client", scope="a"))
    with pytest.raises(TokenRejectedError):  # an ID token: aud, token_use "id"
        auth.verify(mint(key, iss=iss, token_use="id", aud="app-client"))
    with pytest.raises(InvalidClaimError):  # another app client of the pool
        auth.verify(mint(key, iss=iss, token_use="access", client_id="other-client"))
    auth.close()
    ids = verifier(
        providers.cognito(pool, client_id="app-client", token_use="id", authority=base, **LOOPBACK)
    )
    assert ids.verify(mint(key, iss=iss, token_use="id", aud="app-client"))
    with pytest.raises(TokenRejectedError):
        ids.verify(mint(key, iss=iss, token_use="access", client_id="app-client"))
    ids.close()


def test_google_and_firebase_id_tokens(server: DocumentServer, key: Signer) -> None:
    server.set("/oauth2/v3/certs", google_keys([key]))
    auth = verifier(
        providers.google(
            "client.apps.googleusercontent.com", jwks_url=server.url("/oauth2/v3/certs"), **LOOPBACK
        ),
        providers.firebase("my-project", jwks_url=server.url("/oauth2/v3/certs"), **LOOPBACK),
    )
    google = mint(
        key,
        iss="https://accounts.google.com",
        aud="client.apps.googleusercontent.com",
        email_verified=True,
    )
    assert auth.verify(google)
    firebase = mint(
        key, iss="https://securetoken.google.com/my-project", aud="my-project", sub="uid"
    )
    assert auth.verify(firebase)
    with pytest.raises(InvalidAudienceError):  # another Firebase project
        auth.verify(mint(key, iss="https://securetoken.google.com/my-project", aud="other"))
    auth.close()


def test_github_actions_refuses_another_repository(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    metadata(server, "/", base, "/.well-known/jwks")
    server.set("/.well-known/jwks", {"keys": [key.public_jwk()]})
    auth = verifier(
        providers.github_actions(
            repository="octo-org/app",
            ref="refs/heads/main",
            audience="https://github.com/octo-org",
            issuer=base,
            **LOOPBACK,
        )
    )
    shaped = {"iss": base, "aud": "https://github.com/octo-org", "ref": "refs/heads/main"}
    assert auth.verify(
        mint(key, **shaped, repository="octo-org/app", sub="repo:octo-org/app:ref:refs/heads/main")
    )
    for other in (
        {"repository": "evil/app"},
        {"repository": "octo-org/app", "ref": "refs/heads/x"},
    ):
        with pytest.raises(InvalidClaimError):
            auth.verify(mint(key, **{**shaped, **other}))
    with pytest.raises(InvalidClaimError):
        auth.verify(mint(key, **shaped))  # no repository at all
    auth.close()


def test_kubernetes_service_account_tokens(server: DocumentServer, key: Signer) -> None:
    base = server.url("").rstrip("/")
    metadata(server, "/", base, "/openid/v1/jwks")
    server.set("/openid/v1/jwks", {"keys": [key.public_jwk()]})
    auth = verifier(providers.kubernetes(base, audience="vault", **LOOPBACK))
    shaped = {
        "iss": base,
        "sub": "system:serviceaccount:shop:orders",
        "kubernetes.io": {"namespace": "shop", "serviceaccount": {"name": "orders", "uid": "u"}},
    }
    assert auth.verify(mint(key, **shaped, aud=["vault"]))
    with pytest.raises(InvalidAudienceError):  # the API server's own audience
        auth.verify(mint(key, **shaped, aud=["https://kubernetes.default.svc"]))
    auth.close()


def test_presets_are_plain_issuers() -> None:
    preset = providers.keycloak("https://sso.example.com", "shop", audience="orders-api")
    assert isinstance(preset, Issuer)
    assert repr(preset) == "Issuer('https://sso.example.com/realms/shop', discover=True)"
