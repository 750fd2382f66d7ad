"""Multi-tenant issuers: Entra ID's ``{tenantid}`` template, bound to ``tid``, allow-listed.

A real server on 127.0.0.1 plays Entra ID's ``common`` endpoint: metadata at
``/common/v2.0/.well-known/openid-configuration`` whose ``issuer`` is the
template, one JWKS of alg-less RSA keys with ``x5c`` for every tenant, and
tokens of three tenants signed by those shared keys.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi import Depends, FastAPI
from forge import NOW, Signer, private_key
from servers import DocumentServer, serve
from test_jwks_providers import entra_v2

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    FetchOptions,
    InvalidIssuerError,
    Issuer,
    JWTVerifier,
    KeysUnavailableError,
    TenantRejectedError,
)
from grelmicro.jwt.fastapi import JWTBearer

FAST = FetchOptions(connect_timeout=1, read_timeout=1, total_timeout=2, jitter=0)
AUD = "api://orders"
V2 = "https://login.microsoftonline.com/{tenantid}/v2.0"
V1 = "https://sts.windows.net/{tenantid}/"
T1 = "0f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f"
T2 = "7d1e9a20-5b3c-4f6d-8e9a-0b1c2d3e4f50"
T3 = "c3a8e1f2-9d4b-4e7a-b6c5-d4e3f2a1b0c9"
COMMON = "/common/v2.0"
KEYS = "/common/discovery/v2.0/keys"


def v2(tenant: str) -> str:
    return V2.replace("{tenantid}", tenant)


def v1(tenant: str) -> str:
    return V1.replace("{tenantid}", tenant)


@pytest.fixture
def entra(server: DocumentServer) -> Signer:
    """The ``common`` metadata and its JWKS on the server; the signing key."""
    key = private_key("RS256", kid="entra-1", seed=60)
    server.set(
        COMMON + "/.well-known/openid-configuration",
        {
            "token_endpoint": server.url("/common/oauth2/v2.0/token"),
            "jwks_uri": server.url(KEYS),
            "issuer": V2,
            "id_token_signing_alg_values_supported": ["RS256"],
        },
    )
    server.set(KEYS, entra_v2([key]), headers={"Cache-Control": "public, max-age=86400"})
    return key


def token(key: Signer, iss: str, tid: object, **claims: Any) -> str:
    return key.mint({"iss": iss, "tid": tid, "aud": AUD, "sub": "u", "exp": NOW + 600, **claims})


def entra_verifier(server: DocumentServer, tenants: Any, **options: Any) -> JWTVerifier:
    return JWTVerifier(
        discover=server.url(COMMON),
        issuer=V2,
        tenants=tenants,
        audience=AUD,
        allow_insecure_loopback=True,
        fetch=FAST,
        **options,
    )


# -- as a new user tries it --------------------------------------------------------


def test_listed_tenants_pass_others_are_refused_one_fetch(
    server: DocumentServer, entra: Signer
) -> None:
    verifier = entra_verifier(server, [T1, T2])
    for tenant in (T1, T2):
        claims = verifier.verify(token(entra, v2(tenant), tenant), now=NOW)
        assert claims.tenant == tenant
        assert claims.issuer == v2(tenant)
    with pytest.raises(TenantRejectedError) as caught:
        verifier.verify(token(entra, v2(T3), T3), now=NOW)
    assert caught.value.reason == "tenant"
    assert "is not one this service accepts" in str(caught.value)
    # iss names t1, tid says t2: the token of another tenant's app registration.
    with pytest.raises(TenantRejectedError) as caught:
        verifier.verify(token(entra, v2(T1), T2), now=NOW)
    assert "is not the tenant its iss names" in str(caught.value)
    assert server.count(KEYS) == 1  # one JWKS for every tenant
    assert server.count(COMMON + "/.well-known/openid-configuration") == 1
    verifier.close()


def test_any_tenant_when_said_explicitly(server: DocumentServer, entra: Signer) -> None:
    verifier = entra_verifier(server, "any")
    for tenant in (T1, T2, T3):
        assert verifier.verify(token(entra, v2(tenant), tenant), now=NOW).tenant == tenant
    with pytest.raises(TenantRejectedError):  # "any" still binds iss to tid
        verifier.verify(token(entra, v2(T1), T3), now=NOW)
    assert server.count(KEYS) == 1
    verifier.close()


def test_the_issuer_object_form_and_v1_tokens_share_one_fetch(
    server: DocumentServer, entra: Signer
) -> None:
    verifier = JWTVerifier(
        issuers=[
            Issuer(V2, jwks_url=server.url(KEYS), tenants=[T1], allow_insecure_loopback=True),
            Issuer(V1, jwks_url=server.url(KEYS), tenants=[T1], allow_insecure_loopback=True),
            Issuer(
                "https://idp.example.com/", jwks_url=server.url(KEYS), allow_insecure_loopback=True
            ),
        ],
        audience=AUD,
        fetch=FAST,
    )
    assert verifier.verify(token(entra, v2(T1), T1), now=NOW).tenant == T1
    assert verifier.verify(token(entra, v1(T1), T1), now=NOW).issuer == v1(T1)
    assert verifier.verify(token(entra, "https://idp.example.com/", None), now=NOW)
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v1(T2), T2), now=NOW)
    with pytest.raises(TenantRejectedError):  # "common" is no tenant of the list, nor the tid
        verifier.verify(token(entra, "https://login.microsoftonline.com/common/v2.0", T1), now=NOW)
    assert server.count(KEYS) == 1
    verifier.close()


def test_a_template_issuer_with_keys_given_in_code(entra: Signer) -> None:
    verifier = JWTVerifier(jwks=entra_v2([entra]), issuer=V2, tenants=[T1], audience=AUD)
    assert verifier.verify(token(entra, v2(T1), T1), now=NOW).tenant == T1
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T2), T2), now=NOW)


def test_the_template_itself_is_no_issuer(server: DocumentServer, entra: Signer) -> None:
    verifier = entra_verifier(server, "any")
    with pytest.raises(InvalidIssuerError):
        verifier.verify(token(entra, V2, "{tenantid}"), now=NOW)
    verifier.close()


def test_a_tid_that_contradicts_its_iss_spends_no_fetch(
    server: DocumentServer, entra: Signer
) -> None:
    verifier = entra_verifier(server, [T1])
    assert verifier.verify(token(entra, v2(T1), T1), now=NOW)
    stranger = private_key("RS256", kid="not-published", seed=61)
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(stranger, v2(T1), T2), now=NOW)
    assert server.count(KEYS) == 1
    verifier.close()


# -- tenants decided at run time -------------------------------------------------


def test_a_callable_decides_and_its_answers_are_kept(server: DocumentServer, entra: Signer) -> None:
    asked: list[str] = []

    def signed_up(tenant: str) -> bool:
        asked.append(tenant)
        return tenant == T2

    verifier = entra_verifier(server, signed_up, cache_size=0)
    for _ in range(3):
        assert verifier.verify(token(entra, v2(T2), T2), now=NOW).tenant == T2
        with pytest.raises(TenantRejectedError):
            verifier.verify(token(entra, v2(T3), T3), now=NOW)
    assert asked == [T2, T3]  # each tenant asked once within the TTL
    verifier.close()


def test_only_true_allows(server: DocumentServer, entra: Signer) -> None:
    verifier = entra_verifier(server, lambda tenant: "yes")
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T1), T1), now=NOW)
    verifier.close()


def test_a_failing_callable_is_a_503_and_asked_again(server: DocumentServer, entra: Signer) -> None:
    calls = []

    def flaky(tenant: str) -> bool:
        calls.append(tenant)
        if len(calls) == 1:
            raise RuntimeError("directory down")
        return True

    verifier = entra_verifier(server, flaky)
    with pytest.raises(KeysUnavailableError):
        verifier.verify(token(entra, v2(T1), T1), now=NOW)
    assert verifier.verify(token(entra, v2(T1), T1), now=NOW).tenant == T1
    verifier.close()


def test_an_async_callable_on_the_event_loop(server: DocumentServer, entra: Signer) -> None:
    asked: list[str] = []

    async def signed_up(tenant: str) -> bool:
        await asyncio.sleep(0)
        asked.append(tenant)
        return tenant in (T1, T2)

    verifier = entra_verifier(server, signed_up)

    async def main() -> None:
        await verifier.start()
        for tenant in (T1, T2):
            claims = await verifier.verify_async(token(entra, v2(tenant), tenant), now=NOW)
            assert claims.tenant == tenant
        with pytest.raises(TenantRejectedError):
            await verifier.verify_async(token(entra, v2(T3), T3), now=NOW)
        await verifier.aclose()

    asyncio.run(main())
    assert asked == [T1, T2, T3]


def test_an_async_callable_from_sync_code(server: DocumentServer, entra: Signer) -> None:
    async def signed_up(tenant: str) -> bool:
        return tenant == T1

    verifier = entra_verifier(server, signed_up)
    assert verifier.verify(token(entra, v2(T1), T1), now=NOW).tenant == T1
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T2), T2), now=NOW)
    verifier.close()


def test_an_async_callable_that_does_not_look_like_one(
    server: DocumentServer, entra: Signer
) -> None:
    class Directory:
        def __call__(self, tenant: str) -> Any:  # returns a coroutine: async in disguise
            return self.lookup(tenant)

        async def lookup(self, tenant: str) -> bool:
            return tenant == T1

    verifier = entra_verifier(server, Directory())
    assert verifier.verify(token(entra, v2(T1), T1), now=NOW).tenant == T1  # off any loop

    async def main() -> None:
        try:
            assert (await verifier.verify_async(token(entra, v2(T1), T1), now=NOW)).tenant == T1
            with pytest.raises(TenantRejectedError):
                await verifier.verify_async(token(entra, v2(T2), T2), now=NOW)
        finally:
            await verifier.aclose()

    asyncio.run(main())


def test_results_of_a_callable_tenant_are_cached_no_longer_than_its_ttl(
    server: DocumentServer, entra: Signer
) -> None:
    verifier = entra_verifier(server, lambda tenant: True, tenants_ttl=1.0)
    good = token(entra, v2(T1), T1)
    assert verifier.verify(good, now=NOW)
    assert verifier.verify(good, now=NOW + 0.5)
    info = verifier.cache_info()
    assert info.size == 1
    verifier.close()


def test_a_token_that_waits_for_the_first_keys_is_checked_the_same(
    server: DocumentServer, entra: Signer
) -> None:
    """The miss that waits on the event loop for the keys ends with the tenant checks too."""
    from grelmicro.jwt._steps import Pending  # noqa: PLC0415 - the suspended miss itself

    verifier = entra_verifier(server, lambda tenant: True, tenants_ttl=1.0, cache_stats=True)
    good = token(entra, v2(T1), T1)

    async def main() -> None:
        try:
            with pytest.raises(Pending) as caught:  # no keys yet: a sync call on the loop
                verifier.verify(good, now=NOW)
            # The steps end with the checks of the verified iss and tid (and the TTL cap).
            assert caught.value.steps.__name__ == "_then_checked"
            assert (await caught.value.finish()).tenant == T1
            with pytest.raises(TenantRejectedError):
                await verifier.verify_async(token(entra, v2(T1), T2), now=NOW)
        finally:
            await verifier.aclose()

    asyncio.run(main())
    # The waited token was stored like any miss (verified at NOW), no longer than tenants_ttl.
    assert verifier.verify(good, now=NOW + 0.5).tenant == T1
    assert verifier.cache_info().hits == 1  # the waited answer, from the cache
    assert verifier.verify(good, now=NOW + 1.0)  # stored until NOW + 1.0 only
    assert verifier.cache_info().hits == 1
    verifier.close()


# -- configuration ---------------------------------------------------------------


def test_from_the_environment(server: DocumentServer, entra: Signer) -> None:
    environ = {
        "GRELMICRO_JWT_DISCOVER": server.url(COMMON),
        "GRELMICRO_JWT_ISSUER": V2,
        "GRELMICRO_JWT_TENANTS": f"{T1}, {T2}",
        "GRELMICRO_JWT_AUDIENCE": AUD,
        "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK": "true",
    }
    verifier = JWTVerifier.from_env(environ=environ, fetch=FAST)
    assert verifier.verify(token(entra, v2(T2), T2), now=NOW).tenant == T2
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T3), T3), now=NOW)
    verifier.close()
    with pytest.raises(ConfigurationError, match="TENANTS"):
        JWTVerifier.from_env(environ={**environ, "GRELMICRO_JWT_TENANTS": f"{T1},,"})
    with pytest.raises(ConfigurationError, match="tenants="):
        JWTVerifier.from_env(environ={k: v for k, v in environ.items() if "TENANTS" not in k})


def test_a_template_needs_tenants() -> None:
    with pytest.raises(ConfigurationError, match='tenants="any"'):
        Issuer(V2, jwks_url="https://login.microsoftonline.com/common/discovery/v2.0/keys")
    with pytest.raises(ConfigurationError, match="tenants="):
        JWTVerifier(jwks_url="https://login.microsoftonline.com/common/keys", issuer=V2)
    with pytest.raises(ConfigurationError, match="empty"):
        Issuer(V2, jwks_url="https://x.example/keys", tenants=[])


@pytest.mark.parametrize(
    ("tenants", "message"),
    [
        ("all", 'or "any"'),
        (T1, r"tenants=\['"),
        (["../etc"], "not one path segment"),
        (["contoso.onmicrosoft.com"], "not one path segment"),
        ([7], "not one path segment"),
        (3, 'or "any"'),
    ],
)
def test_tenants_are_checked_at_build(tenants: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Issuer(V2, jwks_url="https://x.example/keys", tenants=tenants)


def test_tenants_without_a_template_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="issuer template"):
        Issuer("https://idp.example.com/", jwks_url="https://x.example/keys", tenants=[T1])
    with pytest.raises(ConfigurationError, match="issuer template"):
        JWTVerifier(
            jwks_url="https://x.example/keys", issuer="https://idp.example.com/", tenants=[T1]
        )


@pytest.mark.parametrize(
    "template",
    [
        "https://{tenantid}.example.com/",  # in the host
        "https://login.example.com/t-{tenantid}/v2.0",  # part of a segment
        "https://login.example.com/{tenantid}x/v2.0",
        "https://login.example.com/{tenantid}/{tenantid}",  # twice
        "https://login.example.com/{tenant}/v2.0",  # another placeholder
        "https://login.example.com/{tenantid}/v2.0?x=1",
        "https:///{tenantid}/v2.0",  # no host
        "login.example.com/{tenantid}/v2.0",  # no scheme
        "https://login.example.com/{TenantId}/v2.0",
        "https://login.example.com/{tenantid}/v2.0}",
    ],
)
def test_malformed_templates_are_refused(template: str) -> None:
    with pytest.raises(ConfigurationError):
        Issuer(template, jwks_url="https://x.example/keys", tenants="any")


def test_a_template_has_no_url_of_its_own() -> None:
    with pytest.raises(ConfigurationError, match=r"common/v2\.0"):
        Issuer(V2, discover=True, tenants=[T1])
    with pytest.raises(ConfigurationError, match="goes in issuer="):
        JWTVerifier(discover=V2)


@pytest.mark.parametrize(
    "other",
    [
        Issuer(V2, jwks_url="https://y.example/keys", tenants="any"),  # the same template
        Issuer("https://login.microsoftonline.com/common/v2.0", jwks_url="https://y.example/k"),
        Issuer(
            "https://login.microsoftonline.com/{tenantid}/v2.0/",
            jwks_url="https://y.example/k",
            tenants="any",
        ),
    ],
    ids=["same-template", "an-issuer-it-matches", "trailing-slash"],
)
def test_issuers_that_can_match_the_same_iss_are_refused(other: Issuer) -> None:
    template = Issuer(V2, jwks_url="https://x.example/keys", tenants="any")
    if other.issuer.endswith("/"):  # .../t/v2.0/ is not .../t/v2.0: both may be configured
        JWTVerifier(issuers=[template, other]).close()
        return
    with pytest.raises(ConfigurationError, match=r"twice|can match the same iss"):
        JWTVerifier(issuers=[template, other])


def test_two_templates_that_overlap_are_refused() -> None:
    a = Issuer(
        "https://login.example.com/{tenantid}/x", jwks_url="https://x.example/k", tenants="any"
    )
    b = Issuer(
        "https://login.example.com/t1/{tenantid}", jwks_url="https://y.example/k", tenants="any"
    )
    with pytest.raises(ConfigurationError, match="can match the same iss"):
        JWTVerifier(issuers=[a, b])  # https://login.example.com/t1/x matches both


def test_discovery_of_the_template_without_issuer_says_how(
    server: DocumentServer, entra: Signer
) -> None:
    verifier = JWTVerifier(discover=server.url(COMMON), allow_insecure_loopback=True, fetch=FAST)
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(token(entra, v2(T1), T1), now=NOW)
    assert caught.value.wait == "config"
    assert f'pass issuer="{V2}" and tenants=[...]' in str(caught.value)
    verifier.close()


def test_a_template_pointed_at_one_tenants_metadata_says_how(
    server: DocumentServer, entra: Signer
) -> None:
    server.set(
        f"/{T1}/v2.0/.well-known/openid-configuration",
        {"issuer": v2(T1), "jwks_uri": server.url(KEYS)},
    )
    verifier = JWTVerifier(
        issuers=[
            Issuer(
                V2, discover=server.url(f"/{T1}/v2.0"), tenants=[T1], allow_insecure_loopback=True
            )
        ],
        fetch=FAST,
    )
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(token(entra, v2(T1), T1), now=NOW)
    assert "names one tenant's issuer" in str(caught.value)
    verifier.close()


# -- attacks -------------------------------------------------------------------------

#: A segment that is not one tenant id: each token says the same in ``tid``, so
#: only the strictness of the match can refuse it.
INJECTED = {
    "slash": f"{T1}/{T3}",
    "dot-dot": "..",
    "dot-dot-path": f"{T1}/../{T3}",
    "percent-slash": f"{T1}%2F{T3}",
    "percent-encoded-id": "%30f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f",
    "cyrillic-e": T1.replace("e", "\u0435"),  # a look-alike of a listed id
    "fullwidth-digit": "\uff10" + T1[1:],
    "empty": "",
    "space": f" {T1}",
    "newline": f"{T1}\n",
    "nul": f"{T1}\x00",
    "domain": "contoso.onmicrosoft.com",
    "too-long": "a" * 65,
}


@pytest.mark.parametrize("segment", list(INJECTED.values()), ids=list(INJECTED))
@pytest.mark.parametrize("tenants", [[T1, T3], "any"], ids=["listed", "any"])
def test_placeholder_injection_is_refused(
    server: DocumentServer, entra: Signer, segment: str, tenants: Any
) -> None:
    verifier = entra_verifier(server, tenants)
    with pytest.raises(InvalidIssuerError) as caught:
        verifier.verify(token(entra, v2(segment), segment), now=NOW)
    assert caught.value.reason == "issuer"
    assert "\n" not in str(caught.value)
    assert "\u0435" not in str(caught.value)  # escaped, never echoed raw
    verifier.close()


@pytest.mark.parametrize(
    "iss",
    [
        f"https://login.microsoftonline.com.evil.example/{T1}/v2.0",
        f"https://login.microsoftonline.com/{T1}/v2.0/",
        f"https://login.microsoftonline.com/{T1}/v2.0/x",
        f"https://login.microsoftonline.com/{T1}/v2.00",
        f"http://login.microsoftonline.com/{T1}/v2.0",
        f"https://LOGIN.microsoftonline.com/{T1}/v2.0",
        f"https://login.microsoftonline.com//{T1}/v2.0",
    ],
)
def test_near_miss_issuers_are_refused(server: DocumentServer, entra: Signer, iss: str) -> None:
    verifier = entra_verifier(server, "any")
    with pytest.raises(InvalidIssuerError):
        verifier.verify(token(entra, iss, T1), now=NOW)
    verifier.close()


@pytest.mark.parametrize(
    "tid",
    [123, [T1], {"id": T1}, None, True, T1.upper(), f"{T1} "],
    ids=["int", "list", "object", "null", "bool", "upper-case", "trailing-space"],
)
def test_a_tenant_claim_that_is_not_the_tenant_is_refused(
    server: DocumentServer, entra: Signer, tid: object
) -> None:
    verifier = entra_verifier(server, "any")
    with pytest.raises(TenantRejectedError) as caught:
        verifier.verify(token(entra, v2(T1), tid), now=NOW)
    assert caught.value.reason == "tenant"
    verifier.close()


def test_a_token_without_the_tenant_claim_is_refused(server: DocumentServer, entra: Signer) -> None:
    verifier = entra_verifier(server, "any")
    bare = entra.mint({"iss": v2(T1), "aud": AUD, "exp": NOW + 600})
    with pytest.raises(TenantRejectedError, match="no tid claim"):
        verifier.verify(bare, now=NOW)
    verifier.close()


def test_another_tenant_claim_is_bound_instead(entra: Signer) -> None:
    verifier = JWTVerifier(
        jwks=entra_v2([entra]), issuer=V2, tenants=[T1], tenant_claim="org", audience=AUD
    )
    good = entra.mint({"iss": v2(T1), "org": T1, "tid": T2, "aud": AUD, "exp": NOW + 600})
    assert verifier.verify(good, now=NOW)["org"] == T1
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T1), T1), now=NOW)  # no org claim


def test_a_key_of_another_issuer_never_verifies_a_tenant_token(
    server: DocumentServer, entra: Signer
) -> None:
    other = private_key("RS256", kid="other-1", seed=62)
    verifier = JWTVerifier(
        issuers=[
            Issuer(V2, jwks_url=server.url(KEYS), tenants="any", allow_insecure_loopback=True),
            Issuer("https://idp.example.com/", jwks=entra_v2([other])),
        ],
        fetch=FAST,
    )
    forged = other.with_kid("entra-1")
    with pytest.raises(Exception) as caught:
        verifier.verify(token(forged, v2(T1), T1), now=NOW)
    assert getattr(caught.value, "reason", None) in ("signature", "unknown-key")
    verifier.close()


# -- FastAPI under uvicorn ------------------------------------------------------------


def test_through_jwtbearer_under_uvicorn(server: DocumentServer, entra: Signer) -> None:
    verifier = entra_verifier(server, [T1, T2], clock=lambda: float(NOW))
    auth = JWTBearer(verifier)
    app = FastAPI()
    auth.install(app)

    verified, of_t1 = Depends(auth), Depends(auth.require_tenant(T1))

    @app.get("/me")
    def me(claims: Claims = verified) -> dict[str, Any]:
        return {"tenant": claims.tenant}

    @app.get("/t1")
    def t1_only(claims: Claims = of_t1) -> dict[str, Any]:
        return {"tenant": claims.tenant}

    def bearer(value: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {value}"}

    with serve(app) as client:
        for tenant in (T1, T2):
            response = client.get("/me", headers=bearer(token(entra, v2(tenant), tenant)))
            assert response.status_code == 200
            assert response.json() == {"tenant": tenant}
        refused = client.get("/me", headers=bearer(token(entra, v2(T3), T3)))
        assert refused.status_code == 401
        assert refused.json()["reason"] == "tenant"
        assert T3 not in refused.text
        crossed = client.get("/me", headers=bearer(token(entra, v2(T1), T2)))
        assert crossed.status_code == 401
        assert crossed.json()["reason"] == "tenant"
        assert client.get("/t1", headers=bearer(token(entra, v2(T1), T1))).status_code == 200
        other = client.get("/t1", headers=bearer(token(entra, v2(T2), T2)))
        assert other.status_code == 403
        assert other.json()["reason"] == "access-denied"
        assert other.json()["missing"] == ["tenant"]
        assert T2 not in other.text
    assert server.count(KEYS) == 1


def test_through_jwtbearer_with_any_tenant(server: DocumentServer, entra: Signer) -> None:
    async def signed_up(tenant: str) -> bool:
        return tenant != T3

    for tenants, refused in (("any", ()), (signed_up, (T3,))):
        auth = JWTBearer(entra_verifier(server, tenants, clock=lambda: float(NOW)))
        app = FastAPI()
        auth.install(app)

        verified = Depends(auth)

        @app.get("/me")
        def me(claims: Claims = verified) -> dict[str, Any]:
            return {"tenant": claims.tenant}

        with serve(app) as client:
            for tenant in (T1, T2, T3):
                response = client.get(
                    "/me", headers={"Authorization": f"Bearer {token(entra, v2(tenant), tenant)}"}
                )
                assert response.status_code == (401 if tenant in refused else 200)
