"""Attack class: one DPoP client denying service to the others through the replay store.

Issue 24, finding 1 (medium): the replay store had 8 shards and a full shard
refused every new proof, so one client key with one valid bound token could
keep a shard full and have every client whose key hashed there refused
(503). The rule chosen: each client key (``cnf.jkt``) holds at most
``max_per_key`` live proofs; a key over its quota is refused alone
(``DPoPReplayError.over_quota``, 429 with ``Retry-After``), every other key
is served until the whole store holds ``max_size`` live entries
(``store_full``, 503). The store is pluggable (:class:`ReplayBackend`); a
backend that fails refuses the request (fail closed). Also from the issue
(info): ``cnf.jkt`` is compared with the proof's key before its signature is
checked, so an attacker's costly proof key is refused without the
signature work.

Every case counts proofs with an injected clock: nothing here measures time.

References: RFC 9449 §11.1 (replay), §4.3 step 12, §7.1; CWE-400 (resource
exhaustion), CWE-770 (allocation without limits or throttling).
"""

from __future__ import annotations

from typing import Any

import forge
import pytest
import support
from dpop_proofs import ProofSigner
from fastapi import Depends, FastAPI

from grelmicro.jwt import (
    Claims,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
    DPoPVerifier,
    JWTVerifier,
    Key,
    ReplayBackend,
    ReplayStore,
)
from grelmicro.jwt.fastapi_dpop import DPoPBearer

NOW = forge.NOW
URI = support.ORIGIN + "/items"
ISSUER_SECRET = b"security-suite-dpop-fairness-issuer-01"
TOKENS = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0)


class Client:
    """A DPoP client: its own key and an access token bound to it."""

    def __init__(self, seed: int) -> None:
        self.signer = ProofSigner("ES256", seed=seed)
        self.token = forge.mint(
            {"alg": "HS256", "typ": "at+jwt"},
            support.payload(sub=f"client-{seed}", cnf={"jkt": self.signer.jkt}),
            ISSUER_SECRET,
        )
        self.sent = 0

    def proof(self, *, iat: float = NOW, jti: str | None = None) -> str:
        self.sent += 1
        return self.signer.proof(
            "GET", URI, self.token, iat=iat, jti=jti or f"{self.signer.jkt[:8]}-{self.sent}"
        )

    def present(self, dpop: DPoPVerifier, proof: str, *, now: float = NOW) -> None:
        claims = TOKENS.verify(self.token, now=now)
        dpop.check(
            scheme="DPoP",
            access_token=self.token,
            claims=claims,
            proof=proof,
            method="GET",
            uri=URI,
            now=now,
        )


def refusal(call: Any) -> DPoPReplayError:
    with pytest.raises(DPoPReplayError) as caught:
        call()
    error = caught.value
    assert type(error) is DPoPReplayError
    assert error.reason == "dpop-replay"
    return error


# -- the store itself: counts only ------------------------------------------------


def test_one_key_over_its_quota_never_refuses_another_key():
    """The attacker's key sends far more than a shard held; every victim is still served."""
    store = ReplayStore(max_size=1024, max_per_key=8, shards=8)
    attacker = "attacker-thumbprint"
    for n in range(8):
        assert store.record(b"a%05d" % n, attacker, now=NOW, until=NOW + 70)
    for n in range(8, 400):  # 400 > 1024 / 8 shards: a whole shard under the old design
        error = refusal(lambda n=n: store.record(b"a%05d" % n, attacker, now=NOW, until=NOW + 70))
        assert (error.over_quota, error.store_full) == (True, False)
    assert store.live_for(attacker) == 8

    # Other keys up to their quota while shares are large; then (issue 33,
    # N22: the fair-share rule) one proof each from newcomers, who are always
    # let in while there is room, until the store is full.
    for victim in range(60):
        owner = f"victim-{victim}"
        for n in range(8):
            assert store.record(b"v%03d-%d" % (victim, n), owner, now=NOW, until=NOW + 70)
    for newcomer in range(1024 - 8 - 60 * 8):
        assert store.record(b"n%05d" % newcomer, f"new-{newcomer}", now=NOW, until=NOW + 70)
    assert len(store) == 1024

    # Only now, with every entry live, is a newcomer refused, as store-full.
    error = refusal(lambda: store.record(b"late", "newcomer", now=NOW, until=NOW + 70))
    assert error.store_full
    assert not error.over_quota


def test_a_replay_is_a_replay_even_over_the_quota():
    store = ReplayStore(max_size=64, max_per_key=2)
    assert store.record(b"one", "k", now=NOW, until=NOW + 70)
    assert store.record(b"two", "k", now=NOW, until=NOW + 70)
    assert store.record(b"one", "k", now=NOW, until=NOW + 70) is False
    assert refusal(lambda: store.record(b"three", "k", now=NOW, until=NOW + 70)).over_quota


def test_the_quota_frees_as_the_window_passes():
    store = ReplayStore(max_size=64, max_per_key=2)
    for jti in (b"1", b"2"):
        store.record(jti, "k", now=NOW, until=NOW + 70)
    assert refusal(lambda: store.record(b"3", "k", now=NOW + 70, until=NOW + 140)).over_quota
    # Entries live through their deadline and are forgotten after it.
    assert store.record(b"3", "k", now=NOW + 71, until=NOW + 141)
    assert store.live_for("k") == 1


def test_a_full_store_never_evicts_a_live_entry():
    store = ReplayStore(max_size=16, max_per_key=1)
    for n in range(16):
        store.record(b"%d" % n, f"key-{n}", now=NOW, until=NOW + 70)
    assert refusal(lambda: store.record(b"x", "key-x", now=NOW, until=NOW + 70)).store_full
    for n in range(16):  # every proof recorded is still refused as a replay
        assert store.record(b"%d" % n, f"key-{n}", now=NOW + 1, until=NOW + 71) is False
    # Expired entries never count: after the window the store takes new keys.
    assert store.record(b"x", "key-x", now=NOW + 71, until=NOW + 141)


@pytest.mark.parametrize(
    "options",
    [
        {"max_per_key": 0},
        {"max_per_key": -1},
        {"max_per_key": 65},
        {"max_per_key": True},
        {"max_per_key": 1.5},
        {"max_size": 0},
        {"shards": 3},
    ],
    ids=["zero", "negative", "over-max-size", "bool", "float", "empty-store", "shards-3"],
)
def test_a_quota_that_cannot_hold_is_a_configuration_error(options: dict[str, Any]):
    from grelmicro.jwt import ConfigurationError  # noqa: PLC0415

    with pytest.raises(ConfigurationError):
        ReplayStore(**{"max_size": 64, **options})


def test_the_default_quota_is_far_below_a_shard():
    store = ReplayStore()
    shards = len(store.shard_lengths())
    assert store.max_per_key * 8 <= store.max_size // shards


# -- through the DPoP verifier, with real proofs -----------------------------------------


def test_an_attacker_over_its_quota_is_refused_alone():
    dpop = DPoPVerifier(replay_store=ReplayStore(max_size=64, max_per_key=4), clock=lambda: NOW)
    attacker, victims = Client(100), [Client(101 + n) for n in range(4)]
    for _ in range(4):
        attacker.present(dpop, attacker.proof())
    for _ in range(3):  # it keeps sending: refused each time, 429-style, alone
        proof = attacker.proof()
        error = refusal(lambda proof=proof: attacker.present(dpop, proof))
        assert (error.over_quota, error.store_full) == (True, False)
    for victim in victims:
        for _ in range(4):
            victim.present(dpop, victim.proof())


def test_the_quota_counts_the_tokens_key_not_a_name_the_proof_picks():
    """Proofs by the victim's key need the victim's token: the attacker's own count fills."""
    store = ReplayStore(max_size=64, max_per_key=2)
    dpop = DPoPVerifier(replay_store=store, clock=lambda: NOW)
    attacker, victim = Client(110), Client(111)
    for _ in range(2):
        attacker.present(dpop, attacker.proof())
    # Another jti, or the victim's jkt as a claim: still the attacker's key.
    for claims in ({"jti": "victim-jti"}, {"jkt": victim.signer.jkt, "jti": "x"}):
        proof = attacker.signer.proof("GET", URI, attacker.token, iat=NOW, claims=claims)
        assert refusal(lambda proof=proof: attacker.present(dpop, proof)).over_quota
    assert store.live_for(attacker.signer.jkt) == 2
    assert store.live_for(victim.signer.jkt) == 0
    victim.present(dpop, victim.proof())


def test_a_replayed_proof_is_still_a_replay_not_a_quota_answer():
    dpop = DPoPVerifier(replay_store=ReplayStore(max_size=64, max_per_key=1), clock=lambda: NOW)
    client = Client(120)
    proof = client.proof()
    client.present(dpop, proof)
    error = refusal(lambda: client.present(dpop, proof, now=NOW + 1))
    assert (error.over_quota, error.store_full) == (False, False)


class SharedBackend:
    """A store shared by several workers (what Redis ``SET NX`` gives), kept in a dict."""

    def __init__(self) -> None:
        self.seen: dict[bytes, tuple[str, float]] = {}

    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        if key in self.seen and self.seen[key][1] >= now:
            return False
        self.seen[key] = (owner, until)
        return True


def test_a_shared_backend_refuses_a_proof_replayed_to_another_worker():
    """With one in-process store per worker, each of N workers accepted a captured proof once."""
    backend = SharedBackend()
    assert isinstance(backend, ReplayBackend)
    workers = [DPoPVerifier(replay_store=backend, clock=lambda: NOW) for _ in range(3)]
    client = Client(130)
    proof = client.proof()
    client.present(workers[0], proof)
    for worker in workers[1:]:
        error = refusal(lambda worker=worker: client.present(worker, proof, now=NOW + 1))
        assert (error.over_quota, error.store_full) == (False, False)
    # The backend was told whose proof it is: the token's key.
    assert [owner for owner, _ in backend.seen.values()] == [client.signer.jkt]


def test_separate_in_process_stores_each_accept_a_captured_proof_once():
    """What the docs must say: per-process stores do not see each other's proofs."""
    client = Client(131)
    proof = client.proof()
    for _ in range(2):  # two workers, two stores
        client.present(DPoPVerifier(clock=lambda: NOW), proof)


class BrokenBackend:
    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        raise ConnectionError("replay store unreachable")


class ForgetfulBackend:
    def record(self, key: bytes, owner: str, *, now: float, until: float) -> Any:
        return None  # neither True nor an exception


def test_a_failing_backend_refuses_the_request():
    client = Client(140)
    broken = DPoPVerifier(replay_store=BrokenBackend(), clock=lambda: NOW)
    proof = client.proof()
    with pytest.raises(ConnectionError):
        client.present(broken, proof)
    dpop = DPoPVerifier(replay_store=ForgetfulBackend(), clock=lambda: NOW)
    refusal(lambda: client.present(dpop, client.proof()))


def test_a_replay_store_without_record_is_a_configuration_error():
    from grelmicro.jwt import ConfigurationError  # noqa: PLC0415

    for store in (object(), {}, "redis://localhost"):
        with pytest.raises(ConfigurationError):
            DPoPVerifier(replay_store=store)  # type: ignore[arg-type]


# -- cnf.jkt before the proof signature -------------------------------------------


def _garbage_signature(proof: str) -> str:
    head, body, signature = proof.split(".")
    flipped = "A" if signature[0] != "A" else "B"
    return f"{head}.{body}.{flipped}{signature[1:]}"


def test_a_proof_by_another_key_is_refused_on_its_thumbprint_before_its_signature():
    """An attacker's proof key (any size) is refused by ``cnf.jkt`` without the signature work.

    The proof's signature is broken: refused as ``dpop-binding`` (``jkt``),
    the binding was compared first; ``dpop-proof`` (``signature``) would
    mean the signature was checked first.
    """
    victim, attacker = Client(150), ProofSigner("RS256", seed=151)
    dpop = DPoPVerifier(clock=lambda: NOW)
    proof = _garbage_signature(attacker.proof("GET", URI, victim.token, iat=NOW))
    with pytest.raises(DPoPBindingError) as caught:
        victim.present(dpop, proof)
    assert type(caught.value) is DPoPBindingError
    assert caught.value.check == "jkt"


def test_the_bound_key_with_a_broken_signature_is_a_signature_refusal():
    """The positive control of the test above: the right key, then the signature."""
    client = Client(152)
    with pytest.raises(DPoPProofError) as caught:
        client.present(DPoPVerifier(clock=lambda: NOW), _garbage_signature(client.proof()))
    assert caught.value.check == "signature"


def test_a_refused_proof_adds_no_entry():
    store = ReplayStore(max_size=64, max_per_key=2)
    dpop = DPoPVerifier(replay_store=store, clock=lambda: NOW)
    victim, attacker = Client(160), ProofSigner("ES256", seed=161)
    for _ in range(5):
        with pytest.raises(DPoPBindingError):
            victim.present(dpop, attacker.proof("GET", URI, victim.token, iat=NOW))
    assert len(store) == 0


# -- FastAPI: 429 for the client over its quota, 200 for the others ---------------------


def _app(store: ReplayStore) -> FastAPI:
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0, clock=lambda: NOW)
    auth = DPoPBearer(
        verifier,
        DPoPVerifier("required", replay_store=store, clock=lambda: NOW),
        public_url=support.ORIGIN,
        retry_after=7,
    )
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Claims = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        return {"sub": claims.subject}

    return app


def _request(app: FastAPI, client: Client, proof: str | None = None) -> Any:
    headers = {"Authorization": f"DPoP {client.token}", "DPoP": proof or client.proof()}
    return support.call(app, "/items", headers)


def test_over_quota_is_429_for_that_client_and_the_others_are_served():
    app = _app(ReplayStore(max_size=64, max_per_key=3))
    attacker, victim = Client(170), Client(171)
    assert [_request(app, attacker).status_code for _ in range(3)] == [200, 200, 200]
    for _ in range(3):
        response = _request(app, attacker)
        assert response.status_code == 429
        # The real time until the key's oldest proof expires (issue 33, N22),
        # not the configured default of 7.
        assert response.headers["retry-after"] == "70"
        assert response.json()["reason"] == "dpop-replay-over-quota"
    for _ in range(3):
        response = _request(app, victim)
        assert (response.status_code, response.json()) == (200, {"sub": "client-171"})


def test_a_full_store_is_503_for_everyone():
    app = _app(ReplayStore(max_size=4, max_per_key=1))
    clients = [Client(180 + n) for n in range(5)]
    assert [_request(app, c).status_code for c in clients[:4]] == [200] * 4
    response = _request(app, clients[4])
    assert response.status_code == 503
    assert response.headers["retry-after"] == "70"  # until the oldest entry expires
    assert response.json()["reason"] == "dpop-replay-store-full"
