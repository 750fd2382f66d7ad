"""Tenant lookups in ``health()``, ``/ready`` and telemetry (issue 39, item 4's tail).

A ``tenants=`` callable that fails or overruns its bound answers 503
``tenant-unavailable`` (``test_tenant_policy.py``); here the verifier also
says so where operators look: ``health().tenant_lookups`` (counts and the
exception's class, never a tenant id), the readiness body, the metrics.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from forge import NOW, Signer, private_key
from test_jwks_providers import entra_v2
from test_tenants import AUD, T1, T2, token, v2

from grelmicro.jwt import (
    InvalidSignatureError,
    Issuer,
    JWTVerifier,
    TenantLookupHealth,
    TenantRejectedError,
    TenantUnavailableError,
    _tenants,
)
from grelmicro.jwt.guard import readiness

V2 = "https://login.microsoftonline.com/{tenantid}/v2.0"
#: A tenant id the callable's exception message names: health must not repeat it.
LEAKY = "5e5e5e5e-0000-4000-8000-00000000beef"


@pytest.fixture(scope="module")
def entra() -> Signer:
    return private_key("RS256", kid="entra-1", seed=60)


def verifier_for(entra: Signer, tenants: Any) -> JWTVerifier:
    return JWTVerifier(
        issuers=[Issuer(V2, jwks=entra_v2([entra]), tenants=tenants)],
        audience=AUD,
        clock=lambda: float(NOW),
    )


def lookups(verifier: JWTVerifier) -> TenantLookupHealth:
    (state,) = verifier.health().tenant_lookups
    return state


def eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.005)


def test_a_failing_callable_is_in_health_and_ready_without_tenant_ids(entra: Signer) -> None:
    down = True

    def directory(tenant: str) -> bool:
        if down:
            raise ConnectionError(f"directory down while asking for {tenant} and {LEAKY}")
        return tenant == T1

    verifier = verifier_for(entra, directory)
    assert lookups(verifier) == TenantLookupHealth(issuer=V2)  # nothing asked yet

    with pytest.raises(TenantUnavailableError):
        verifier.verify(token(entra, v2(T1), T1))
    eventually(lambda: lookups(verifier).failures == 1)  # (at once, unless the host stalls)
    state = lookups(verifier)
    health = verifier.health()

    assert state.failing
    assert (state.lookups, state.failures, state.timeouts, state.running) == (1, 1, 0, 0)
    assert state.last_error == "the callable raised ConnectionError"
    assert state.last_failure is not None
    assert NOW - 5 < state.last_failure <= NOW  # on the verifier's clock
    assert health.ready  # keys serve: not a readiness failure
    assert health.tenants_failing
    answer = readiness(verifier)
    assert answer.status_code == 200
    assert answer.body["tenant_lookups"] == [
        {
            "issuer": V2,
            "failing": True,
            "failures": 1,
            "timeouts": 0,
            "busy": 0,
            "last_error": "the callable raised ConnectionError",
        }
    ]
    assert answer.body["tenant_problem"] == (
        f"tenant lookups failing for {V2}: the callable raised ConnectionError"
    )
    shown = repr(health) + json.dumps(answer.body)
    assert T1 not in shown
    assert LEAKY not in shown

    down = False  # the directory is back: the next token's lookup clears the state
    assert verifier.verify(token(entra, v2(T1), T1, jti="again")).tenant == T1
    with pytest.raises(TenantRejectedError):
        verifier.verify(token(entra, v2(T2), T2))
    state = lookups(verifier)
    assert not state.failing
    assert (state.lookups, state.failures, state.allowed, state.refused) == (3, 1, 1, 1)
    assert "tenant_problem" not in readiness(verifier).body
    verifier.close()


def test_a_sync_lookup_past_its_bound_is_overdue_then_a_timeout(
    entra: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tenants, "LOOKUP_WAIT", 0.02)
    monkeypatch.setattr(_tenants, "LOOKUP_TIMEOUT", 0.5)
    release = threading.Event()

    def slow(tenant: str) -> bool:
        release.wait(10)
        return True

    verifier = verifier_for(entra, slow)
    try:
        with pytest.raises(TenantUnavailableError) as caught:
            verifier.verify(token(entra, v2(T1), T1))
        assert caught.value.wait == "tenant-lookup"
        running = lookups(verifier)
        assert (running.running, running.overdue, running.failing) == (1, 0, False)

        eventually(lambda: lookups(verifier).overdue == 1)  # past its bound, it hangs on
        overdue = lookups(verifier)
        assert (overdue.running, overdue.overdue, overdue.failing) == (1, 1, True)
        assert "1 running past their bound" in overdue.problem
    finally:
        release.set()
    eventually(lambda: lookups(verifier).running == 0)
    late = lookups(verifier)
    assert (late.failures, late.timeouts, late.failing, late.allowed) == (1, 1, True, 0)
    assert late.last_error == "a lookup took longer than 0.5 s"
    verifier.close()


def test_an_async_lookup_that_times_out_counts_as_a_timeout(
    entra: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tenants, "LOOKUP_WAIT", 5.0)  # the request sees the lookup end
    monkeypatch.setattr(_tenants, "LOOKUP_TIMEOUT", 0.05)

    async def never(tenant: str) -> bool:
        await asyncio.sleep(30)
        return True

    verifier = verifier_for(entra, never)

    async def main() -> None:
        with pytest.raises(TenantUnavailableError) as caught:
            await verifier.verify_async(token(entra, v2(T1), T1))
        assert caught.value.wait == "tenant-lookup-failed"  # the lookup ended within the wait

    asyncio.run(main())
    state = lookups(verifier)
    assert (state.lookups, state.failures, state.timeouts, state.failing) == (1, 1, 1, True)
    verifier.close()


def test_busy_refusals_are_counted_and_forged_tokens_cause_no_lookup(
    entra: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tenants, "LOOKUP_WAIT", 0.02)
    monkeypatch.setattr(_tenants, "MAX_LOOKUPS", 1)
    release = threading.Event()
    forger = private_key("RS256", kid="entra-1", seed=61)  # same kid, another key

    def stuck(tenant: str) -> bool:
        release.wait(10)
        return True

    verifier = verifier_for(entra, stuck)
    invented = [f"33333333-0000-0000-0000-{i:012d}" for i in range(50)]
    try:
        for tenant in invented:  # unsigned: refused before any lookup
            with pytest.raises(InvalidSignatureError):
                verifier.verify(token(forger, v2(tenant), tenant))
        assert lookups(verifier).lookups == 0
        for tenant in (T1, T2):  # signed: the first lookup hangs, the second finds it busy
            with pytest.raises(TenantUnavailableError):
                verifier.verify(token(entra, v2(tenant), tenant))
        state = lookups(verifier)
        assert (state.lookups, state.busy, state.running) == (1, 1, 1)
        shown = repr(verifier.health()) + json.dumps(readiness(verifier).body)
        assert not any(tenant in shown for tenant in (*invented, T1, T2))
    finally:
        release.set()
    verifier.close()


def test_templates_without_a_callable_have_no_lookups(entra: Signer) -> None:
    listed = verifier_for(entra, [T1])
    assert listed.verify(token(entra, v2(T1), T1)).tenant == T1
    assert listed.health().tenant_lookups == ()
    assert "tenant_lookups" not in readiness(listed).body
    listed.close()
