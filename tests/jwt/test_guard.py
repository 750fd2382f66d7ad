"""The framework-free building blocks: grant checks, challenges, the Guard, start_sync.

Every integration (Flask, Django/DRF, WSGI, ASGI, and FastAPI's JWTBearer)
answers through these; the integrations' own tests check the wiring only.
"""

from __future__ import annotations

import json
import threading

import pytest
from dpop_proofs import URI, ProofSigner, access_token
from forge import NOW, SECRET, hmac_key
from servers import FAST, jwks_of

from grelmicro.jwt import (
    AccessDeniedError,
    ConfigurationError,
    DPoPVerifier,
    InsufficientRoleError,
    InsufficientScopeError,
    JWTVerifier,
    Key,
    KeyPendingError,
    KeysUnavailableError,
    UnknownKeyError,
    require_roles,
    require_scopes,
    require_tenant,
)
from grelmicro.jwt.challenges import Challenges, Refusal
from grelmicro.jwt.guard import Guard, readiness

SIGNER = hmac_key()


def verifier() -> JWTVerifier:
    return JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)


def mint(**claims: object) -> str:
    return SIGNER.mint({"sub": "u1", "exp": NOW + 3600, **claims})


# -- the grant checks -------------------------------------------------------------


def test_require_scopes_names_what_is_missing_and_everything_required():
    claims = {"scope": "a b"}
    require_scopes(claims, ["a"])
    require_scopes(claims, "b")

    with pytest.raises(InsufficientScopeError) as caught:
        require_scopes(claims, ["a", "c", "d"])

    assert caught.value.missing == ("c", "d")
    assert caught.value.required == ("a", "c", "d")
    assert caught.value.reason == "insufficient-scope"


def test_require_scopes_counts_permissions_only_when_asked():
    claims = {"permissions": ["read:x"]}
    with pytest.raises(InsufficientScopeError):
        require_scopes(claims, ["read:x"])
    require_scopes(claims, ["read:x"], permissions=True)


def test_require_roles_reads_keycloak_paths():
    claims = {"realm_access": {"roles": ["clerk"]}}
    require_roles(claims, ["clerk"], role_claims="realm_access.roles")

    with pytest.raises(InsufficientRoleError) as caught:
        require_roles(claims, ["clerk", "admin"], role_claims="realm_access.roles")

    assert caught.value.missing == ("admin",)


def test_require_tenant_never_shows_the_tokens_tenant():
    require_tenant({"tid": "t1"}, ["t1", "t2"])

    with pytest.raises(AccessDeniedError) as caught:
        require_tenant({"tid": "secret-tenant"}, ["t1"])

    assert caught.value.missing == ("tenant",)
    assert "secret-tenant" not in str(caught.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: require_scopes({}, [""]),
        lambda: require_roles({}, [3]),  # type: ignore[list-item]
        lambda: require_tenant({}, ["t"], claim=""),
    ],
)
def test_checks_refuse_malformed_requirements(call):
    with pytest.raises(ConfigurationError):
        call()


# -- the answers ----------------------------------------------------------------------


def answer_of(exc: Exception, **options: object) -> Refusal:
    return Challenges(realm="api", **options).answer(exc)  # type: ignore[arg-type]


def test_a_refused_token_is_a_401_invalid_token_with_its_reason():
    refusal = answer_of(UnknownKeyError("no such kid"))

    assert refusal.status_code == 401
    assert refusal.headers["WWW-Authenticate"] == (
        'Bearer realm="api", error="invalid_token", error_description="unknown-key"'
    )
    body = json.loads(refusal.body())
    assert body["reason"] == "unknown-key"
    assert "no such kid" not in refusal.body().decode()


def test_a_missing_scope_is_a_403_naming_every_required_scope():
    with pytest.raises(InsufficientScopeError) as caught:
        require_scopes({"scope": "a"}, ["a", "b"])

    refusal = answer_of(caught.value)

    assert refusal.status_code == 403
    assert 'error="insufficient_scope", scope="a b"' in refusal.headers["WWW-Authenticate"]
    assert refusal.problem()["missing"] == ["b"]


def test_a_missing_role_and_a_wrong_tenant_are_403s():
    with pytest.raises(InsufficientRoleError) as role:
        require_roles({}, ["admin"])
    with pytest.raises(AccessDeniedError) as tenant:
        require_tenant({}, ["t1"])

    assert answer_of(role.value).problem()["reason"] == "insufficient-role"
    assert answer_of(tenant.value).problem()["missing"] == ["tenant"]


@pytest.mark.parametrize(("seconds", "header"), [(0.2, "1"), (2.5, "3"), (None, "7")])
def test_retry_after_comes_from_the_error(seconds, header):
    error = KeyPendingError("later")
    error.retry_after = seconds
    error.wait = "fetch-in-flight"

    refusal = answer_of(error, retry_after=7)

    assert refusal.status_code == 503
    assert refusal.headers["Retry-After"] == header
    assert refusal.problem()["wait"] == "fetch-in-flight"
    assert refusal.problem()["reason"] == "key-pending"


def test_a_configuration_error_has_no_http_answer():
    with pytest.raises(TypeError):
        answer_of(ConfigurationError("bad"))


def test_dpop_challenges():
    challenges = Challenges(realm="api")
    challenges.add_dpop(["ES256"], "required", nonce=lambda: "n-1")
    from grelmicro.jwt import DPoPProofError  # noqa: PLC0415

    nonce = DPoPProofError("nonce")
    nonce.use_nonce = True
    refused = challenges.answer(nonce)

    assert challenges.missing().headers["WWW-Authenticate"] == 'DPoP realm="api", algs="ES256"'
    assert refused.headers["DPoP-Nonce"] == "n-1"
    assert refused.headers["WWW-Authenticate"].startswith(
        'DPoP realm="api", error="use_dpop_nonce"'
    )


# -- the Guard --------------------------------------------------------------------------


def test_guard_accepts_a_token_with_its_grants():
    guard = Guard(verifier(), realm="api", role_claims="realm_access.roles")
    token = mint(scope="orders:read", realm_access={"roles": ["clerk"]})

    claims = guard.authenticate(f"Bearer {token}", scopes=["orders:read"], roles=["clerk"])

    assert claims.subject == "u1"


@pytest.mark.parametrize(
    ("authorization", "query", "status", "reason"),
    [
        (None, "", 401, "missing-token"),
        ("Basic abc", "", 401, "missing-token"),
        ("Bearer ", "", 400, "empty-token"),
        (["Bearer a", "Bearer b"], "", 400, "multiple-tokens"),
        (None, "access_token=x", 400, "query-token"),
        ("Bearer not-a-token", "", 401, "malformed"),
    ],
)
def test_guard_refusals(authorization, query, status, reason):
    guard = Guard(verifier(), realm="api")

    with pytest.raises(Refusal) as caught:
        guard.authenticate(authorization, query=query)

    assert caught.value.status_code == status
    assert caught.value.reason == reason
    assert "WWW-Authenticate" in caught.value.headers


def test_guard_refuses_missing_grants_with_403():
    guard = Guard(verifier())
    token = mint(scope="a")

    with pytest.raises(Refusal) as caught:
        guard.authenticate(f"Bearer {token}", scopes=["a", "b"], roles=["x"])

    assert caught.value.status_code == 403
    assert caught.value.reason == "insufficient-scope"


def test_guard_refuses_a_dpop_bound_token_sent_as_bearer():
    guard = Guard(JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW))
    client = ProofSigner()

    with pytest.raises(Refusal) as caught:
        guard.authenticate(f"Bearer {access_token(client.jkt)}")

    assert caught.value.reason == "dpop-binding"


def test_guard_checks_dpop_proofs():
    dpop = DPoPVerifier("accepted", clock=lambda: NOW)
    guard = Guard(JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW), dpop=dpop)
    client = ProofSigner()
    token = access_token(client.jkt)

    claims = guard.authenticate(
        f"DPoP {token}", proof=client.proof("GET", URI, token), method="GET", uri=URI
    )
    assert claims.subject == "user-1"

    proof = client.proof("GET", URI, token, jti="same")
    guard.authenticate(f"DPoP {token}", proof=proof, method="GET", uri=URI)
    with pytest.raises(Refusal) as caught:  # the same proof again: a replay
        guard.authenticate(f"DPoP {token}", proof=proof, method="GET", uri=URI)
    assert caught.value.headers["WWW-Authenticate"].startswith("DPoP ")
    assert caught.value.error == "invalid_dpop_proof"


@pytest.mark.anyio
async def test_guard_async_waits_for_keys_on_the_loop(server):
    key, source = rs256_source(server)
    guard = Guard(source)
    assert guard.readiness().status_code == 503
    claims = await guard.authenticate_async(f"Bearer {key.mint({'sub': 's', 'exp': 2**40})}")
    assert claims.subject == "s"


# -- start_sync ---------------------------------------------------------------------


def rs256_source(server):
    from forge import private_key  # noqa: PLC0415

    key = private_key("RS256", kid="k1")
    server.set("/jwks", jwks_of(key))
    return key, JWTVerifier(jwks_url=server.url("/jwks"), allow_insecure_loopback=True, fetch=FAST)


def test_start_sync_loads_keys_before_the_first_request_and_close_stops_it(server):
    key, verifier = rs256_source(server)
    assert readiness(verifier).status_code == 503

    verifier.start_sync()
    verifier.start_sync()  # again: nothing more

    threads = [t for t in threading.enumerate() if t.name == "grelmicro-jwt-keys"]
    assert readiness(verifier).status_code == 200
    assert server.count("/jwks") == 1
    assert verifier.verify(key.mint({"sub": "s", "exp": 2**40})).subject == "s"
    assert len(threads) == 1

    verifier.close()
    assert not threads[0].is_alive()


def test_start_sync_without_keys_is_not_ready_and_says_when_to_retry(server):
    server.set("/jwks", b"down", status=500)
    _, verifier = rs256_source(server)
    server.set("/jwks", b"down", status=500)

    verifier.start_sync()
    try:
        answer = readiness(verifier)
        assert answer.status_code == 503
        assert int(answer.headers["Retry-After"]) >= 1
    finally:
        verifier.close()
    with pytest.raises(KeysUnavailableError):
        verifier.verify(hmac_key().with_kid("k1").mint({"exp": 2**40}))


def test_start_sync_is_a_no_op_for_static_keys():
    verifier().start_sync()
    verifier().close()
