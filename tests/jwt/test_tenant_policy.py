"""Tenant and guest policy without oracles or amplification (issue 39: N26-N28, N31, N32).

The same loopback Entra ID ``common`` endpoint as ``test_tenants.py``. Each
test names the finding it closes:

- N26: an unsigned token learns nothing about the allow-list;
- N27: lookups of a ``tenants=`` callable are bounded (only signed tokens
  cause one; at most ``MAX_LOOKUPS`` at once; refused answers never evict
  allowed ones; a sync callable never runs on the event loop);
- N28: ``claims.tenant`` and ``require_tenant`` read a template's tenant claim
  from a template's token only;
- N31: tenant refusals and the discovery issuer mismatch quote with ``quoted()``;
- N32: an undecided lookup is a 503 of its own (``tenant-unavailable``, ``wait``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from fastapi import Depends, FastAPI
from forge import NOW, Signer, private_key
from servers import DocumentServer, serve
from support import FakeClock, eventually
from test_jwks_providers import entra_v2
from test_tenants import AUD, COMMON, FAST, T1, T2, T3, token, v2
from test_tenants import entra as entra  # noqa: PLC0414 - the fixture, shared

from grelmicro.jwt import (
    Claims,
    GuestRejectedError,
    InvalidClaimError,
    Issuer,
    JWTVerifier,
    KeysUnavailableError,
    TenantRejectedError,
    TenantUnavailableError,
    TokenRejectedError,
    _tenants,
)
from grelmicro.jwt.fastapi import JWTBearer

V2 = "https://login.microsoftonline.com/{tenantid}/v2.0"


def verifier_for(server: DocumentServer, tenants: Any, **options: Any) -> JWTVerifier:
    return JWTVerifier(
        issuers=[
            Issuer(
                V2,
                discover=server.url(COMMON),
                tenants=tenants,
                allow_insecure_loopback=True,
                **options,
            )
        ],
        audience=AUD,
        fetch=FAST,
        clock=lambda: float(NOW),
    )


def app_for(verifier: JWTVerifier, *, tenant: str | None = None) -> FastAPI:
    auth = JWTBearer(verifier)
    app = FastAPI()
    auth.install(app)
    guard = Depends(auth if tenant is None else auth.require_tenant(tenant))

    @app.get("/me")
    def me(claims: Claims = guard) -> dict[str, Any]:
        return {"tenant": claims.tenant, "guest": claims.is_guest}

    return app


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


# -- N26: no allow-list oracle -------------------------------------------------------


@pytest.mark.parametrize("kid", ["entra-1", "not-published"])
def test_n26_an_allowed_and_an_unknown_tenant_get_the_same_answer_to_a_forged_token(
    server: DocumentServer, entra: Signer, kid: str
) -> None:
    asked: list[str] = []

    def directory(tenant: str) -> bool:
        asked.append(tenant)
        return tenant == T1

    forger = private_key("RS256", kid=kid, seed=77)  # the published kid, or an unknown one
    for tenants in ([T1], directory):
        answers = []
        for tenant in (T1, T3):  # each against a fresh service: the same key state
            with serve(app_for(verifier_for(server, tenants))) as client:
                response = client.get("/me", headers=bearer(token(forger, v2(tenant), tenant)))
            answers.append(
                (response.status_code, response.json(), response.headers["WWW-Authenticate"])
            )
        assert answers[0] == answers[1]
        assert answers[0][0] == 401
        assert answers[0][1]["reason"] in ("signature", "unknown-key")
    assert asked == []  # an unsigned token causes no lookup


def test_n26_the_refusal_of_a_signed_token_of_a_refused_tenant_still_says_tenant(
    server: DocumentServer, entra: Signer
) -> None:
    verifier = verifier_for(server, [T1])
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T3), T3))
    verifier.close()


# -- N27: bounded lookups ------------------------------------------------------------


def test_n27_invented_tenants_cause_no_lookup_and_known_answers_stay(
    server: DocumentServer, entra: Signer
) -> None:
    asked: list[str] = []

    def directory(tenant: str) -> bool:
        asked.append(tenant)
        return tenant == T1

    verifier = verifier_for(server, directory)
    assert verifier.verify(token(entra, v2(T1), T1)).tenant == T1
    forger = private_key("RS256", kid="entra-1", seed=78)
    for i in range(2000):
        invented = f"00000000-0000-0000-0000-{i:012d}"
        with pytest.raises(TokenRejectedError):
            verifier.verify(token(forger, v2(invented), invented))
    assert asked == [T1]
    assert verifier.verify(token(entra, v2(T1), T1, jti="again")).tenant == T1
    assert asked == [T1]  # still cached
    verifier.close()


def test_n27_refused_answers_never_evict_allowed_ones(
    server: DocumentServer, entra: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tenants, "TENANT_CACHE_SIZE", 8)
    asked: list[str] = []

    def directory(tenant: str) -> bool:
        asked.append(tenant)
        return tenant == T1

    verifier = verifier_for(server, directory)
    verifier.verify(token(entra, v2(T1), T1))
    for i in range(40):  # signed tokens of tenants the service does not serve
        other = f"11111111-0000-0000-0000-{i:012d}"
        with pytest.raises(TenantRejectedError):
            verifier.verify(token(entra, v2(other), other))
    assert verifier.verify(token(entra, v2(T1), T1, jti="later")).tenant == T1
    assert asked.count(T1) == 1
    verifier.close()


def test_n27_lookups_at_once_are_bounded_and_a_stuck_one_answers_503_in_time(
    server: DocumentServer, entra: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tenants, "LOOKUP_WAIT", 0.05)  # each request waits this, then 503
    release = threading.Event()
    running: list[str] = []

    def stuck(tenant: str) -> bool:
        running.append(tenant)
        release.wait(30)
        return True

    verifier = verifier_for(server, stuck)
    tenants = [f"22222222-0000-0000-0000-{i:012d}" for i in range(_tenants.MAX_LOOKUPS + 4)]
    waits: list[str | None] = []
    try:
        for tenant in tenants:
            with pytest.raises(TenantUnavailableError) as caught:
                verifier.verify(token(entra, v2(tenant), tenant))
            waits.append(caught.value.wait)
        assert waits[: _tenants.MAX_LOOKUPS] == ["tenant-lookup"] * _tenants.MAX_LOOKUPS
        assert set(waits[_tenants.MAX_LOOKUPS :]) == {"tenant-lookups-busy"}
        assert len(running) == _tenants.MAX_LOOKUPS
    finally:
        release.set()
    verifier.close()


def test_n27_nobody_waits_on_a_lookup_past_its_wait_nor_beside_one_while_lookups_fail(
    server: DocumentServer, entra: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory that hangs held a request thread a lookup wait for every token of its tenant.

    The key path's rule (``test_route.py``): nobody waits on a lookup past
    ``LOOKUP_WAIT`` from its start, and while the last lookup failed only
    the request that starts one waits for it; the others get their 503 at
    once while the lookup goes on.
    """
    monkeypatch.setattr(_tenants, "LOOKUP_WAIT", 30.0)
    monkeypatch.setattr(_tenants, "LOOKUP_TIMEOUT", 120.0)
    gates = [threading.Event()]
    down = [False]

    def directory(tenant: str) -> bool:
        if down[0]:
            raise ConnectionError("directory down")
        gates[-1].wait(30)
        return True

    issuer = Issuer(
        V2, discover=server.url(COMMON), tenants=directory, allow_insecure_loopback=True
    )
    assert issuer.tenants is not None
    mono = issuer.tenants.timer = FakeClock(1000.0)  # the lookups' monotonic clock
    parking = issuer.tenants.parking
    verifier = JWTVerifier(issuers=[issuer], audience=AUD, fetch=FAST, clock=lambda: float(NOW))
    served: list[str | None] = []

    def starter(tenant: str) -> threading.Thread:
        thread = threading.Thread(
            target=lambda: served.append(verifier.verify(token(entra, v2(tenant), tenant)).tenant)
        )
        thread.start()
        eventually(lambda: parking.count == 1, "the request that started the lookup waits")
        return thread

    def newcomer(tenant: str) -> str | None:
        """A request for ``tenant`` beside the waiting one: answered, never parked."""
        answered: list[TenantUnavailableError] = []

        def run() -> None:
            try:
                verifier.verify(token(entra, v2(tenant), tenant, jti="newcomer"))
            except TenantUnavailableError as error:
                answered.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        eventually(lambda: not thread.is_alive() or parking.count > 1, "answered or parked")
        assert parking.count == 1  # it did not wait
        thread.join(30)
        (error,) = answered
        return error.wait

    try:
        first = starter(T1)
        mono.now += 31  # the lookup has run past LOOKUP_WAIT, short of its timeout
        assert newcomer(T1) == "tenant-lookup"
        gates[-1].set()  # the lookup answers: the request that waited is served
        first.join(30)
        assert served == [T1]

        down[0] = True  # the directory fails: the lookup's starter gets its 503
        with pytest.raises(TenantUnavailableError) as caught:
            verifier.verify(token(entra, v2(T2), T2))
        assert caught.value.wait == "tenant-lookup-failed"
        down[0] = False
        gates.append(threading.Event())  # back, but slow to answer
        second = starter(T3)
        assert newcomer(T3) == "tenant-lookup"  # while lookups fail: no wait beside it
        gates[-1].set()
        second.join(30)
        assert served == [T1, T3]
    finally:
        for gate in gates:
            gate.set()
    verifier.close()


def test_n27_a_sync_callable_never_runs_on_the_event_loop(
    server: DocumentServer, entra: Signer
) -> None:
    set_by_loop = threading.Event()
    threads: list[threading.Thread] = []

    def directory(tenant: str) -> bool:
        threads.append(threading.current_thread())
        # Inline on the loop, the loop could not set the event: refused.
        return set_by_loop.wait(5)

    verifier = verifier_for(server, directory)

    async def main() -> None:
        loop_thread = threading.current_thread()

        async def ticker() -> None:
            while not threads:
                await asyncio.sleep(0.005)
            set_by_loop.set()

        tick = asyncio.create_task(ticker())
        claims = await verifier.verify_async(token(entra, v2(T1), T1))
        await tick
        assert claims.tenant == T1
        assert threads
        assert threads[0] is not loop_thread
        await verifier.aclose()

    asyncio.run(main())


# -- N28: the tenant of a template's token only --------------------------------------


def test_n28_another_issuers_tid_is_no_tenant(server: DocumentServer, entra: Signer) -> None:
    customer = private_key("ES256", kid="c1", seed=79)
    verifier = JWTVerifier(
        issuers=[
            Issuer(V2, jwks=entra_v2([entra]), tenants=[T1, T2]),
            Issuer("https://idp.customer.example/", jwks={"keys": [customer.public_jwk()]}),
        ],
        audience=AUD,
        clock=lambda: float(NOW),
    )
    theirs = token(customer, "https://idp.customer.example/", T1)  # their admin wrote tid
    assert verifier.verify(theirs).tenant is None
    assert verifier.verify(theirs)["tid"] == T1  # the claim is there, it is no tenant
    with serve(app_for(verifier, tenant=T1)) as client:
        assert client.get("/me", headers=bearer(token(entra, v2(T1), T1))).status_code == 200
        refused = client.get("/me", headers=bearer(theirs))
        assert refused.status_code == 403
        assert refused.json()["missing"] == ["tenant"]


def test_n28_a_template_with_another_tenant_claim_ignores_a_stray_tid(entra: Signer) -> None:
    template = "https://orgs.example.com/{tenantid}/"
    verifier = JWTVerifier(
        issuers=[Issuer(template, jwks=entra_v2([entra]), tenants=[T2], tenant_claim="org")],
        audience=AUD,
        clock=lambda: float(NOW),
    )
    stray = token(entra, f"https://orgs.example.com/{T2}/", T1, org=T2)  # tid=T1 stray
    assert verifier.verify(stray).tenant == T2
    with serve(app_for(verifier, tenant=T1)) as client:
        assert client.get("/me", headers=bearer(stray)).status_code == 403
    with serve(app_for(verifier, tenant=T2)) as client:
        assert client.get("/me", headers=bearer(stray)).json()["tenant"] == T2


# -- N31: quoted values ----------------------------------------------------------------


def test_n31_a_tenant_refusal_escapes_quotes(entra: Signer) -> None:
    verifier = JWTVerifier(
        jwks=entra_v2([entra]), issuer=V2, tenants=[T1], audience=AUD, clock=lambda: float(NOW)
    )
    with pytest.raises(TenantRejectedError) as caught:
        verifier.verify(token(entra, v2(T1), 'x" injected="1'))
    assert '\\"' in str(caught.value)
    assert 'x" injected' not in str(caught.value)


def test_n31_the_discovery_mismatch_escapes_quotes() -> None:
    from grelmicro.jwt._discovery import issuer_mismatch  # noqa: PLC0415

    message = issuer_mismatch('https://idp.example.com/" x="y', "https://idp.example.com/")
    assert '\\" x=\\"y"' in message
    assert '" x="y' not in message


# -- N32: an undecided tenant is labelled for what it is ----------------------------------


def test_n32_a_failing_lookup_is_a_503_tenant_unavailable_with_its_wait(
    server: DocumentServer, entra: Signer
) -> None:
    def down(tenant: str) -> bool:
        raise RuntimeError("directory down")

    verifier = verifier_for(server, down)
    with pytest.raises(TenantUnavailableError) as caught:
        verifier.verify(token(entra, v2(T1), T1))
    assert isinstance(caught.value, KeysUnavailableError)  # still a 503 for old handlers
    assert caught.value.reason == "tenant-unavailable"
    assert caught.value.wait == "tenant-lookup-failed"
    with serve(app_for(verifier)) as client:
        response = client.get("/me", headers=bearer(token(entra, v2(T1), T1, jti="2")))
    assert response.status_code == 503
    assert response.json()["reason"] == "tenant-unavailable"
    assert response.json()["wait"] == "tenant-lookup-failed"
    assert "Retry-After" in response.headers


# -- guests ------------------------------------------------------------------------------


def test_guests_are_refused_with_403_when_said(entra: Signer) -> None:
    verifier = JWTVerifier(
        issuers=[Issuer(V2, jwks=entra_v2([entra]), tenants=[T1], guests="refuse")],
        audience=AUD,
        clock=lambda: float(NOW),
    )
    member = token(entra, v2(T1), T1, acct=0)
    b2b = token(entra, v2(T1), T1, acct=1)
    home = token(entra, v2(T1), T1, idp=f"https://sts.windows.net/{T2}/")
    assert not verifier.verify(member).is_guest
    for guest in (b2b, home):
        with pytest.raises(GuestRejectedError) as caught:
            verifier.verify(guest)
        assert caught.value.reason == "guest"
    with serve(app_for(verifier)) as client:
        assert client.get("/me", headers=bearer(member)).status_code == 200
        refused = client.get("/me", headers=bearer(b2b))
        assert refused.status_code == 403
        assert refused.json()["reason"] == "guest"
    allowing = JWTVerifier(
        jwks=entra_v2([entra]), issuer=V2, tenants=[T1], audience=AUD, clock=lambda: float(NOW)
    )
    assert allowing.verify(b2b).is_guest


def test_claim_values_and_guests_on_an_exact_issuer(entra: Signer) -> None:
    iss = f"https://login.microsoftonline.com/{T1}/v2.0"
    verifier = JWTVerifier(
        issuers=[
            Issuer(
                iss,
                jwks=entra_v2([entra]),
                guests="refuse",
                claim_values={"ver": "2.0"},
            )
        ],
        audience=AUD,
        clock=lambda: float(NOW),
    )
    assert verifier.verify(token(entra, iss, T1, ver="2.0"))
    with pytest.raises(InvalidClaimError):
        verifier.verify(token(entra, iss, T1, ver="1.0"))
    with pytest.raises(GuestRejectedError):
        verifier.verify(token(entra, iss, T1, ver="2.0", acct=1))
