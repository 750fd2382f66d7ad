"""OIDC discovery and several issuers, each bound to its own keys.

Real servers on 127.0.0.1 play the identity providers: one per tenant, each
with its own keys. The security property under test: a token is accepted
only when the key that verified it belongs to the issuer its ``iss`` names.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from forge import NOW, Signer, private_key
from servers import DocumentServer, jwks_of
from support import FakeClock, timed

from grelmicro.jwt import (
    ConfigurationError,
    FetchOptions,
    InvalidAudienceError,
    InvalidIssuerError,
    Issuer,
    JWTVerifier,
    Key,
    KeysUnavailableError,
    TokenRejectedError,
)

JWKS = "/keys"
OIDC = "/.well-known/openid-configuration"
AUD = "https://api.example.com"
FAST = FetchOptions(connect_timeout=1, read_timeout=0.5, total_timeout=1.5, jitter=0)


def mint(key: Signer, iss: str, aud: str = AUD, **claims: Any) -> str:
    return key.mint({"iss": iss, "aud": aud, "sub": "user-1", "exp": NOW + 3600, **claims})


def metadata(server: DocumentServer, issuer: str | None = None) -> dict[str, Any]:
    return {
        "issuer": issuer if issuer is not None else server.url("/"),
        "jwks_uri": server.url(JWKS),
        "authorization_endpoint": server.url("/authorize"),
        "id_token_signing_alg_values_supported": ["RS256"],
    }


# -- discovery -----------------------------------------------------------------


def test_discovery_finds_the_keys_and_sets_the_issuer(server: DocumentServer) -> None:
    key = private_key("RS256", kid="d1", seed=21)
    server.set(OIDC, metadata(server))
    server.set(JWKS, jwks_of(key))
    verifier = JWTVerifier(
        discover=server.url("/"),
        allow_insecure_loopback=True,
        audience=AUD,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
    )
    assert verifier.config.issuer == (server.url("/"),)
    assert verifier.verify(mint(key, server.url("/")))["sub"] == "user-1"
    with pytest.raises(InvalidIssuerError):
        verifier.verify(mint(key, "https://elsewhere.example.com/"))
    assert (server.count(OIDC), server.count(JWKS)) == (1, 1)
    assert verifier.health().fetch_count == 2
    verifier.close()


def test_discovery_falls_back_to_rfc8414(server: DocumentServer) -> None:
    key = private_key("ES256", kid="d2", seed=22)
    issuer = server.url("/tenant")
    server.set("/.well-known/oauth-authorization-server/tenant", metadata(server, issuer))
    server.set(JWKS, jwks_of(key))
    verifier = JWTVerifier(
        discover=issuer,
        allow_insecure_loopback=True,
        audience=AUD,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
    )
    assert verifier.verify(mint(key, issuer))["sub"] == "user-1"
    assert server.count("/tenant" + OIDC) == 1  # tried first, 404
    verifier.close()


@pytest.mark.parametrize(
    ("document_issuer", "words"),
    [
        (
            "https://evil.example.com/",
            'names issuer "https://evil.example.com", configured "{url}"',
        ),
        # a missing slash is another issuer, and the message says that is all
        ("{url}", 'names issuer "{bare}", configured "{url}".*only a trailing slash differs'),
        (None, 'has no issuer.*configured "{url}"'),
    ],
)
def test_discovery_refuses_a_document_for_another_issuer_as_a_configuration_error(
    server: DocumentServer,
    document_issuer: str | None,
    words: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = private_key("RS256", kid="d1", seed=21)
    url = server.url("/")
    body = metadata(server)
    if document_issuer is None:
        del body["issuer"]
    else:
        body["issuer"] = document_issuer.replace("{url}", url).rstrip("/")
    server.set(OIDC, body)
    server.set(JWKS, jwks_of(key))
    clock = FakeClock()
    verifier = JWTVerifier(
        discover=url,
        allow_insecure_loopback=True,
        fetch=timed(FAST, clock),
        clock=FakeClock(),
    )
    expected = re.escape(words.replace("{url}", url).replace("{bare}", url.rstrip("/")))
    expected = expected.replace(re.escape(".*"), ".*")
    caplog.set_level(logging.DEBUG, logger="grelmicro.jwt")
    for _ in range(2):  # retried about every second: still one ERROR for the one fault
        with pytest.raises(KeysUnavailableError, match=expected) as caught:
            verifier.verify(mint(key, url))
        assert caught.value.wait == "config"
        clock.now += 2
    assert server.count(JWKS) == 0
    assert server.count(OIDC) == 2
    health = verifier.health()
    assert not health.ready
    assert health.config_error is not None
    assert re.search(expected, health.config_error)
    assert health.problem.startswith("configuration error: ")
    events = [getattr(r, "jwt_event", None) for r in caplog.records]
    assert events.count("keys.config_error") == 1
    assert "keys.fetch_failed" not in events
    [record] = [r for r in caplog.records if getattr(r, "jwt_event", None) == "keys.config_error"]
    assert record.levelno == logging.ERROR
    verifier.close()


@pytest.mark.parametrize(
    "jwks_uri", ["http://idp.example.com/keys", "ftp://127.0.0.1/keys", 42, "https://u:p@x/"]
)
def test_discovery_refuses_an_insecure_jwks_uri(server: DocumentServer, jwks_uri: object) -> None:
    body = metadata(server)
    body["jwks_uri"] = jwks_uri
    server.set(OIDC, body)
    verifier = JWTVerifier(
        discover=server.url("/"),
        allow_insecure_loopback=True,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
    )
    with pytest.raises(KeysUnavailableError, match="jwks_uri"):
        verifier.verify(mint(private_key("RS256", seed=21), server.url("/")))
    verifier.close()


def test_discovery_document_faults_end_in_our_taxonomy(server: DocumentServer) -> None:
    for body in ("<html>login</html>", "[]", '{"issuer": '):
        server.set(OIDC, body)
        verifier = JWTVerifier(
            discover=server.url("/"),
            allow_insecure_loopback=True,
            fetch=timed(FAST, FakeClock()),
            clock=FakeClock(),
        )
        with pytest.raises(KeysUnavailableError, match="discovery"):
            verifier.verify(mint(private_key("RS256", seed=21), server.url("/")))
        verifier.close()


# -- several issuers --------------------------------------------------------------


def two_tenants(
    server: DocumentServer,
    other_server: DocumentServer,
    clock: FakeClock | None = None,
    fetch: FetchOptions = FAST,
    **b_policy: Any,
) -> tuple[JWTVerifier, Signer, Signer, str, str]:
    key_a = private_key("RS256", kid="a1", seed=31)
    key_b = private_key("RS256", kid="b1", seed=32)
    server.set(JWKS, jwks_of(key_a))
    other_server.set(JWKS, jwks_of(key_b))
    iss_a, iss_b = "https://tenant-a.example.com/", "https://tenant-b.example.com/"
    verifier = JWTVerifier(
        issuers=[
            Issuer(iss_a, jwks_url=server.url(JWKS), allow_insecure_loopback=True),
            Issuer(
                iss_b, jwks_url=other_server.url(JWKS), allow_insecure_loopback=True, **b_policy
            ),
        ],
        audience=AUD,
        fetch=timed(fetch, clock),
        clock=clock or FakeClock(),
    )
    return verifier, key_a, key_b, iss_a, iss_b


def test_each_issuer_verifies_with_its_own_keys(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    verifier, key_a, key_b, iss_a, iss_b = two_tenants(server, other_server)
    assert verifier.verify(mint(key_a, iss_a))["iss"] == iss_a
    assert verifier.verify(mint(key_b, iss_b))["iss"] == iss_b
    assert (server.count(JWKS), other_server.count(JWKS)) == (1, 1)
    health = verifier.health()
    assert health.ready
    assert (health.key_count, health.fetch_count, len(health.sources)) == (2, 2, 2)
    verifier.close()


def test_a_key_of_one_tenant_cannot_sign_for_another(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    """The attack of issue 8: tenant A's key, a token claiming ``iss: B``."""
    verifier, key_a, key_b, _iss_a, iss_b = two_tenants(server, other_server)
    verifier.verify(mint(key_b, iss_b))
    forged = mint(key_a, iss_b)
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(forged)
    assert caught.value.reason in {"unknown-key", "signature", "issuer"}
    # Even with B's kid in the header, A's key never verifies for B.
    forged_kid = key_a.with_kid("b1")
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(mint(forged_kid, iss_b))
    assert caught.value.reason == "signature"
    # The forged tokens never reached A's keys: A was not even asked again.
    assert server.count(JWKS) == 0
    verifier.close()


def test_an_unconfigured_issuer_is_refused_before_any_network_call(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    verifier, key_a, _, _, _ = two_tenants(server, other_server)
    for iss in ("https://tenant-c.example.com/", None, 42):
        claims: dict[str, Any] = {} if iss is None else {"iss": iss}
        token = key_a.mint({"aud": AUD, "exp": NOW + 60, **claims})
        with pytest.raises(InvalidIssuerError):
            verifier.verify(token)
    assert (server.count(JWKS), other_server.count(JWKS)) == (0, 0)
    verifier.close()


def test_each_issuer_has_its_own_policy(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    verifier, key_a, key_b, iss_a, iss_b = two_tenants(
        server, other_server, audience="api://b-only"
    )
    assert verifier.verify(mint(key_b, iss_b, aud="api://b-only"))
    with pytest.raises(InvalidAudienceError):
        verifier.verify(mint(key_b, iss_b))  # B wants its own audience
    with pytest.raises(InvalidAudienceError):
        verifier.verify(mint(key_a, iss_a, aud="api://b-only"))  # A keeps the default
    verifier.close()


def test_static_and_network_issuers_side_by_side(server: DocumentServer) -> None:
    local = private_key("ES256", kid="local", seed=41)
    remote = private_key("RS256", kid="remote", seed=42)
    server.set(JWKS, jwks_of(remote))
    verifier = JWTVerifier(
        issuers=[
            Issuer("https://internal/", keys=[Key.pem(local.public_pem(), "ES256", kid="local")]),
            Issuer("https://idp/", jwks_url=server.url(JWKS), allow_insecure_loopback=True),
        ],
        audience=AUD,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
    )
    assert verifier.verify(mint(local, "https://internal/"))
    assert server.count(JWKS) == 0  # the static issuer needs no fetch
    assert verifier.verify(mint(remote, "https://idp/"))
    with pytest.raises(TokenRejectedError):
        verifier.verify(mint(remote, "https://internal/"))
    with pytest.raises(TokenRejectedError):
        verifier.verify(mint(local, "https://idp/"))
    verifier.close()


def test_issuers_sharing_one_jwks_url_share_one_fetch(server: DocumentServer) -> None:
    """Entra ID style: every tenant's tokens signed by the common keys."""
    key = private_key("RS256", kid="common", seed=51)
    server.set(JWKS, jwks_of(key))
    tenants = [f"https://login.example.com/{t}/v2.0" for t in ("t1", "t2", "t3")]
    verifier = JWTVerifier(
        issuers=[
            Issuer(t, jwks_url=server.url(JWKS), allow_insecure_loopback=True) for t in tenants
        ],
        audience=AUD,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
    )
    for tenant in tenants:
        assert verifier.verify(mint(key, tenant))["iss"] == tenant
    assert server.count(JWKS) == 1
    verifier.close()


def test_an_invented_kid_flood_across_issuers_stays_within_one_fetch_each(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    clock = FakeClock()
    verifier, key_a, key_b, iss_a, iss_b = two_tenants(server, other_server, clock)
    verifier.verify(mint(key_a, iss_a))
    verifier.verify(mint(key_b, iss_b))
    clock.now += 3  # the keys held predate the flood: each issuer looks once
    for i in range(100):
        for key, iss in ((key_a, iss_a), (key_b, iss_b)):
            with pytest.raises(TokenRejectedError):
                verifier.verify(mint(key.with_kid(f"x{i}"), iss))
    assert (server.count(JWKS), other_server.count(JWKS)) == (2, 2)
    verifier.close()


def test_cached_results_stay_with_their_issuer(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    verifier, key_a, _key_b, iss_a, iss_b = two_tenants(server, other_server)
    token_a = mint(key_a, iss_a)
    first = verifier.verify(token_a)
    assert verifier.verify(token_a) is first  # a cache hit
    forged = mint(key_a, iss_b)
    with pytest.raises(TokenRejectedError):
        verifier.verify(forged)
    with pytest.raises(TokenRejectedError):
        verifier.verify(forged)  # rejections are never cached
    verifier.close()


@pytest.mark.parametrize(
    "settings",
    [
        {"issuers": []},
        {"issuers": ["https://a/"]},
        {"issuers": [Issuer("https://a/", jwks_url="https://a/k")], "issuer": "https://a/"},
        {
            "issuers": [
                Issuer("https://a/", jwks_url="https://a/k"),
                Issuer("https://a/", jwks_url="https://a/j"),
            ]
        },
        {"issuers": [Issuer("https://a/", jwks_url="https://a/k")], "jwks_url": "https://a/k"},
    ],
)
def test_bad_issuer_lists_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        JWTVerifier(**settings)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"jwks_url": "https://a/k", "discover": True},
        {"jwks_url": "http://a.example/k"},
        {"discover": True, "keys": []},
    ],
)
def test_an_issuer_has_exactly_one_safe_key_source(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Issuer("https://a.example/", **settings)


@pytest.mark.anyio
async def test_async_lifecycle_with_several_issuers(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    verifier, key_a, _key_b, iss_a, iss_b = two_tenants(server, other_server)
    async with verifier:
        assert verifier.health().ready
        assert (server.count(JWKS), other_server.count(JWKS)) == (1, 1)
        assert (await verifier.verify_async(mint(key_a, iss_a)))["iss"] == iss_a
        with pytest.raises(TokenRejectedError):
            await verifier.verify_async(mint(key_a, iss_b))


def test_one_issuers_junk_never_spends_another_issuers_budget(
    server: DocumentServer, other_server: DocumentServer
) -> None:
    """Invented kids for tenant A spend A's unknown-kid budget only: B's
    rotation still gets its fetch, and A's own junk gets 503, never 401."""
    clock = FakeClock()
    options = FetchOptions(
        connect_timeout=1, read_timeout=0.5, unknown_kid_budget=2, unknown_kid_interval=30
    )
    verifier, key_a, key_b, iss_a, iss_b = two_tenants(server, other_server, clock, options)
    verifier.verify(mint(key_a, iss_a))
    verifier.verify(mint(key_b, iss_b))
    for round_ in range(2):
        clock.now += 15  # each round's tokens arrive after the last fetch, spread
        with pytest.raises(TokenRejectedError):
            verifier.verify(mint(key_a.with_kid(f"x{round_}"), iss_a))
    assert server.count(JWKS) == 3  # A's load and its budget of 2
    clock.now += 3
    with pytest.raises(KeysUnavailableError):
        verifier.verify(mint(key_a.with_kid("x2"), iss_a))
    assert server.count(JWKS) == 3
    # B rotates: its token of the new key verifies, with B's own fetch.
    b2 = private_key("ES256", kid="b2", seed=33)
    other_server.set(JWKS, jwks_of(key_b, b2))
    assert verifier.verify(mint(b2, iss_b))["iss"] == iss_b
    assert other_server.count(JWKS) == 2
    verifier.close()
