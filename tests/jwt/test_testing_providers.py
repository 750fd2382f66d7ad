"""grelmicro.jwt.testing's provider-shaped issuers: Entra ID, B2C, Cognito, Keycloak.

Their tokens are also checked by PyJWT (an independent implementation);
their servers are real HTTP servers on 127.0.0.1 answering the provider's
paths, read by the :mod:`grelmicro.jwt.providers` presets as in production.
Each test also refuses the confusion the provider invites.
"""

from __future__ import annotations

import socket

import httpx
import jwt as pyjwt
import pytest

from grelmicro.jwt import (
    ConfigurationError,
    GuestRejectedError,
    InvalidAudienceError,
    InvalidClaimError,
    InvalidIssuerError,
    Issuer,
    JWTVerifier,
    TenantRejectedError,
    TokenRejectedError,
)
from grelmicro.jwt.testing import (
    GUEST_HOME_TENANT,
    B2CTestIssuer,
    CognitoTestIssuer,
    EntraTestIssuer,
    KeycloakTestIssuer,
    TestIssuer,
)

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
C = "cccccccc-0000-4000-8000-000000000003"


@pytest.fixture(scope="module")
def entra() -> EntraTestIssuer:
    return EntraTestIssuer(tenant=A, audience="api://orders")


def decoded(issuer: TestIssuer, token: str, **options: object) -> dict[str, object]:
    """The token as PyJWT reads it with the issuer's public key (signature checked)."""
    return pyjwt.decode(  # type: ignore[no-any-return]
        token,
        issuer.private_key.public_key(),
        algorithms=[issuer.algorithm],
        options={"verify_aud": False},
        **options,  # type: ignore[arg-type]
    )


# -- Entra ID: tokens of any tenant, v1 and v2 ----------------------------------------------


def test_entra_v2_and_v1_tokens_are_shaped_as_entra_issues_them(entra: EntraTestIssuer) -> None:
    v2 = decoded(entra, entra.mint(tenant=B, scp=["Orders.Read", "Orders.Write"], sub="s"))
    v1 = decoded(entra, entra.mint(tenant=B, version=1, roles=["Orders.Admin"], sub="s"))

    assert v2["iss"] == f"https://login.microsoftonline.com/{B}/v2.0"
    assert (v2["tid"], v2["ver"], v2["scp"]) == (B, "2.0", "Orders.Read Orders.Write")
    assert v2["azp"] == entra.client_id
    assert "appid" not in v2
    assert v1["iss"] == f"https://sts.windows.net/{B}/"
    assert (v1["tid"], v1["ver"], v1["roles"]) == (B, "1.0", ["Orders.Admin"])
    assert v1["appid"] == entra.client_id
    assert "azp" not in v1
    assert v1["oid"] == v2["oid"]  # one user of one tenant: one object id
    assert decoded(entra, entra.mint(tenant=A, sub="s"))["oid"] != v2["oid"]
    for payload in (v1, v2):
        assert "jti" not in payload
        assert payload["uti"]
        assert payload["nbf"] == payload["iat"]
        assert "acct" not in payload
    guest = decoded(entra, entra.mint(guest=True))
    assert (guest["tid"], guest["acct"]) == (A, 1)
    assert guest["idp"] == f"https://sts.windows.net/{GUEST_HOME_TENANT}/"


def test_entra_verifier_two_tenants_both_versions_and_the_refusals(
    entra: EntraTestIssuer,
) -> None:
    with entra.verifier(tenants=[A, B], versions=(1, 2), guests="refuse") as verifier:
        for tenant in (A, B):
            for version in (1, 2):
                claims = verifier.verify(entra.mint(tenant=tenant, version=version))
                assert claims.tenant == tenant
                assert claims.issuer == entra.issuer_for(tenant, version)
        with pytest.raises(TenantRejectedError):  # signed, of a tenant not served
            verifier.verify(entra.mint(tenant=C))
        with pytest.raises(TenantRejectedError):  # iss names A, tid says B
            verifier.verify(entra.mint(tenant=A, tid=B))
        with pytest.raises(GuestRejectedError):
            verifier.verify(entra.mint(tenant=A, guest=True))
        with pytest.raises(InvalidAudienceError):  # a token for another API
            verifier.verify(entra.mint(tenant=A, aud="api://other"))
    with entra.verifier(tenants=[A]) as only_v2:
        assert only_v2.verify(entra.mint()).tenant == A
        with pytest.raises(InvalidIssuerError):  # a v1 token where the API takes v2
            only_v2.verify(entra.mint(version=1))
        assert only_v2.verify(entra.mint(guest=True)).is_guest  # guests="allow" by default


def test_entra_served_organizations_metadata_with_the_multitenant_preset(
    entra: EntraTestIssuer,
) -> None:
    with entra.serve() as server:
        base = server.url
        assert entra.authority == base
        assert entra.issuer == base + "/{tenantid}/v2.0"
        preset = server.preset(tenants=[A, B])
        assert preset.discovery_url == base + "/organizations/v2.0"
        with JWTVerifier(issuers=[preset]) as verifier:
            for tenant in (A, B):
                assert verifier.verify(entra.mint(tenant=tenant)).issuer == (
                    f"{base}/{tenant}/v2.0"
                )
            with pytest.raises(TenantRejectedError):
                verifier.verify(entra.mint(tenant=C))
        v1 = server.preset(tenants=[A], version=1)
        with JWTVerifier(issuers=[v1]) as verifier:
            assert verifier.verify(entra.mint(version=1)).issuer == f"{base}/{A}/"
        single = server.preset(tenant=A)
        with JWTVerifier(issuers=[single]) as verifier:
            assert verifier.verify(entra.mint()).tenant == A
            with pytest.raises(TenantRejectedError):
                verifier.verify(entra.mint(tenant=B))
        assert server.paths["/organizations/v2.0/.well-known/openid-configuration"] == 1
        assert server.paths["/organizations/.well-known/openid-configuration"] == 1
        assert server.paths[f"/{A}/discovery/v2.0/keys"] == 1
    assert entra.authority == "https://login.microsoftonline.com"  # restored after the block


def test_entra_served_documents_have_entras_shape(entra: EntraTestIssuer) -> None:
    with entra.serve() as server, httpx.Client(base_url=server.url) as http:
        common = http.get("/common/v2.0/.well-known/openid-configuration").json()
        tenant = http.get(f"/{A}/v2.0/.well-known/openid-configuration").json()
        v1 = http.get("/common/.well-known/openid-configuration").json()
        keys = http.get("/common/discovery/v2.0/keys").json()["keys"]
        v1_keys = http.get("/common/discovery/keys").json()["keys"]
        missing = http.get("/common/v3.0/.well-known/openid-configuration")

    assert common["issuer"] == server.url + "/{tenantid}/v2.0"
    assert common["jwks_uri"] == server.url + "/common/discovery/v2.0/keys"
    assert tenant["issuer"] == f"{server.url}/{A}/v2.0"
    assert v1["issuer"] == server.url + "/{tenantid}/"
    assert v1["jwks_uri"] == server.url + "/common/discovery/keys"
    assert [sorted(key) for key in keys] == [
        ["cloud_instance_name", "e", "issuer", "kid", "kty", "n", "use"]
    ]
    assert keys[0]["issuer"] == server.url + "/{tenantid}/v2.0"
    assert "issuer" not in v1_keys[0]
    assert missing.status_code == 404


def test_entra_real_issuer_strings_served_from_loopback(entra: EntraTestIssuer) -> None:
    with entra.serve(as_issuer=False) as server:
        template = "https://login.microsoftonline.com/{tenantid}/v2.0"
        issuer = Issuer(
            template,
            discover=server.url + "/common/v2.0",
            tenants=[A],
            allow_insecure_loopback=True,
            audience="api://orders",
        )
        with JWTVerifier(issuers=[issuer]) as verifier:
            claims = verifier.verify(entra.mint())
        assert claims.issuer == f"https://login.microsoftonline.com/{A}/v2.0"


def test_entra_through_an_httpx_transport_at_the_real_host(entra: EntraTestIssuer) -> None:
    with httpx.Client(transport=entra.transport()) as http:
        preset = entra.preset(tenants=[A, B])
        with JWTVerifier(issuers=[preset], client=http) as verifier:
            assert verifier.verify(entra.mint(tenant=B)).tenant == B


# -- B2C, Cognito, Keycloak ---------------------------------------------------------------


def test_b2c_policy_metadata_names_the_issuer_beside_it() -> None:
    b2c = B2CTestIssuer("contoso", "B2C_1_signin", audience="app-client")
    payload = decoded(b2c, b2c.mint(sub="u-1"))
    assert (
        payload["iss"] == "https://contoso.b2clogin.com/11111111-1111-4111-8111-111111111111/v2.0/"
    )
    assert (payload["tfp"], payload["ver"], payload["oid"]) == ("B2C_1_signin", "1.0", "u-1")
    with b2c.serve() as server:
        preset = server.preset()
        assert preset.discovery_url == server.discovery_url.removesuffix(
            "/.well-known/openid-configuration"
        )
        with JWTVerifier(issuers=[preset]) as verifier:
            assert verifier.verify(b2c.mint()).issuer == b2c.issuer
            with pytest.raises(InvalidAudienceError):  # another application's token
                verifier.verify(b2c.mint(aud="other-app"))
        keys = httpx.get(server.jwks_url).json()["keys"]
    assert [list(key)[:4] for key in keys] == [["kid", "nbf", "use", "kty"]]
    assert "alg" not in keys[0]


def test_cognito_access_and_id_tokens_each_refused_where_the_other_is_required() -> None:
    cognito = CognitoTestIssuer("eu-west-1_Pool42", client_id="app-client")
    access = decoded(cognito, cognito.mint())
    id_token = decoded(cognito, cognito.mint(token_use="id"), audience="app-client")
    assert "aud" not in access
    assert (access["token_use"], access["client_id"]) == ("access", "app-client")
    assert (id_token["token_use"], id_token["aud"]) == ("id", "app-client")
    assert "client_id" not in id_token
    with cognito.serve() as server:
        assert cognito.issuer == server.url + "/eu-west-1_Pool42"
        with JWTVerifier(issuers=[server.preset()]) as verifier:
            assert verifier.verify(cognito.mint()).subject == cognito.subject
            with pytest.raises(TokenRejectedError):
                verifier.verify(cognito.mint(token_use="id"))
            with pytest.raises(InvalidClaimError):  # another app client of the pool
                verifier.verify(cognito.mint(client_id="other-client"))
        with JWTVerifier(issuers=[server.preset(token_use="id")]) as verifier:
            assert verifier.verify(cognito.mint(token_use="id"))
            with pytest.raises(TokenRejectedError):
                verifier.verify(cognito.mint())
        keys = httpx.get(server.jwks_url).json()["keys"]
    assert [list(key) for key in keys] == [["alg", "e", "kid", "kty", "n", "use"]]
    with pytest.raises(ConfigurationError):
        cognito.mint(token_use="refresh")


def test_keycloak_realm_refuses_another_realm_without_fetching_it() -> None:
    keycloak = KeycloakTestIssuer("shop", audience="orders-api", client="web")
    payload = decoded(keycloak, keycloak.mint(roles=["reader"]))
    assert payload["realm_access"] == {"roles": ["reader"]}
    assert (payload["typ"], payload["azp"]) == ("Bearer", "web")
    assert "roles" not in payload
    one_role = decoded(keycloak, keycloak.mint(roles="admin"))
    assert one_role["realm_access"] == {"roles": ["admin"]}
    with keycloak.serve() as server:
        with JWTVerifier(issuers=[server.preset()]) as verifier:
            assert verifier.verify(keycloak.mint()).issuer == server.url + "/realms/shop"
            with pytest.raises(InvalidIssuerError):
                verifier.verify(keycloak.mint(realm="other"))
            health = verifier.health()
        assert server.paths["/realms/other/.well-known/openid-configuration"] == 0
        assert (
            httpx.get(server.url + "/realms/other/.well-known/openid-configuration").status_code
            == 404
        )
    assert health.key_count == 1  # the encryption key is listed, and left out
    assert [kid for kid, _ in health.skipped_keys] == ["enc-1"]


@pytest.mark.parametrize(
    "issuer",
    [B2CTestIssuer, CognitoTestIssuer, KeycloakTestIssuer],
    ids=["b2c", "cognito", "keycloak"],
)
def test_the_in_code_verifier_has_the_presets_policy(issuer: type[TestIssuer]) -> None:
    made = issuer()
    with made.verifier() as verifier:
        assert verifier.verify(made.mint()).issuer == made.issuer
        with pytest.raises(TokenRejectedError):
            verifier.verify(made.mint(iss=made.issuer + "x"))


# -- serve(port=) and bad input -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_on_a_chosen_port_and_a_taken_one_is_refused(entra: EntraTestIssuer) -> None:
    port = free_port()
    plain = TestIssuer()
    with plain.serve(port=port) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        assert httpx.get(server.jwks_url).json() == plain.jwks
        with pytest.raises(ConfigurationError, match=f"127.0.0.1:{port}"), entra.serve(port=port):
            pass
    with entra.serve(port=port) as served:  # free again once the block ended
        assert served.url == f"http://127.0.0.1:{port}"
    for bad in (-1, 65536, True, "80"):
        with pytest.raises(ConfigurationError), plain.serve(port=bad):  # type: ignore[arg-type]
            pass


def test_provider_issuers_refuse_bad_input(entra: EntraTestIssuer) -> None:
    with pytest.raises(ConfigurationError):
        EntraTestIssuer(tenant="a/b")
    with pytest.raises(ConfigurationError):
        EntraTestIssuer(version=3)  # type: ignore[arg-type]
    for version in (0, 3, "2"):
        with pytest.raises(ConfigurationError):
            entra.mint(version=version)
    with pytest.raises(ConfigurationError):
        entra.preset(tenant=A, tenants=[A])
    with pytest.raises(ConfigurationError):
        entra.preset()
    with pytest.raises(ConfigurationError):
        KeycloakTestIssuer("../admin")
    with pytest.raises(ConfigurationError):
        CognitoTestIssuer("pool/x")
