"""DPoP through a real uvicorn on 127.0.0.1: an httpx client signs a proof per request.

Answers are checked as a client sees them on the wire: status, the exact
``WWW-Authenticate`` string (RFC 9449 §7.1), ``DPoP-Nonce``, the problem body;
plus the OpenAPI scheme and the demo's DPoP route. Time is pinned on both
sides (the server's clocks and the proofs' ``iat``).
"""

from collections.abc import Generator
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Security

pytest.importorskip("cryptography", reason="DPoP proofs are signed with cryptography")

from dpop_proofs import ProofSigner, access_token
from forge import NOW, SECRET, tamper
from servers import serve

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    DPoPNonces,
    DPoPVerifier,
    JWTVerifier,
    Key,
    ReplayStore,
)
from grelmicro.jwt.fastapi import DPoPBearer

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"
ALGS = 'algs="RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 ES256K EdDSA Ed25519"'


class DPoPAuth(httpx.Auth):
    """A DPoP client: signs a fresh proof for every request; retries once with a server nonce."""

    def __init__(self, signer: ProofSigner, token: str, *, iat: float = NOW) -> None:
        self.signer = signer
        self.token = token
        self.iat = iat
        self.nonce: str | None = None
        self.proofs_signed = 0

    def _sign(self, request: httpx.Request) -> None:
        uri = str(request.url.copy_with(query=None, fragment=None))
        request.headers["Authorization"] = f"DPoP {self.token}"
        request.headers["DPoP"] = self.signer.proof(
            request.method, uri, self.token, iat=self.iat, nonce=self.nonce
        )
        self.proofs_signed += 1

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self._sign(request)
        response = yield request
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code == 401 and 'error="use_dpop_nonce"' in challenge:
            self.nonce = response.headers["dpop-nonce"]
            self._sign(request)
            yield request


def build(dpop: DPoPVerifier | None = None, **options: Any) -> FastAPI:
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)
    if "public_url" not in options and "allowed_hosts" not in options:
        options.setdefault("trust_host_header", True)  # the tests address 127.0.0.1:<port>
    auth = DPoPBearer(verifier, dpop or DPoPVerifier(clock=lambda: NOW), **options)
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {"sub": claims.subject}

    @app.post("/items")
    def add(claims: Annotated[Claims, Security(auth, scopes=["write"])]) -> dict[str, Any]:
        return {"added_by": claims.subject}

    return app


SIGNER = ProofSigner("ES256")
BOUND = access_token(SIGNER.jkt, scope="write")


# -- accepted ------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["ES256", "ES384", "PS256", "RS256", "EdDSA"])
def test_a_client_signing_each_request_gets_through(algorithm: str):
    signer = ProofSigner(algorithm)
    token = access_token(signer.jkt, scope="write")
    auth = DPoPAuth(signer, token)

    with serve(build()) as client:
        first = client.get("/items?page=2", auth=auth)
        second = client.get("/items", auth=auth)
        third = client.post("/items", auth=auth)

    assert (first.status_code, first.json()) == (200, {"sub": "user-1"})
    assert second.status_code == 200
    assert (third.status_code, third.json()) == (200, {"added_by": "user-1"})
    assert auth.proofs_signed == 3


def test_a_nonce_round_trip():
    nonces = DPoPNonces(clock=lambda: NOW)
    auth = DPoPAuth(SIGNER, BOUND)

    with serve(build(DPoPVerifier(nonces=nonces, clock=lambda: NOW))) as client:
        response = client.get("/items", auth=auth)

    assert response.status_code == 200
    assert auth.nonce == nonces.current(NOW)
    assert auth.proofs_signed == 2


def test_use_dpop_nonce_answer():
    nonces = DPoPNonces(clock=lambda: NOW)
    with serve(build(DPoPVerifier(nonces=nonces, clock=lambda: NOW))) as client:
        proof = SIGNER.proof("GET", str(client.base_url).rstrip("/") + "/items", BOUND)
        response = client.get("/items", headers={"Authorization": f"DPoP {BOUND}", "DPoP": proof})

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'DPoP error="use_dpop_nonce", error_description="use-dpop-nonce", {ALGS}'
    )
    assert response.headers["dpop-nonce"] == nonces.current(NOW)
    assert response.json()["error"] == "use_dpop_nonce"


# -- refusals on the wire -------------------------------------------------------------


def _get(client: httpx.Client, headers: dict[str, str], path: str = "/items") -> httpx.Response:
    return client.get(path, headers=headers)


def test_refusals_answer_per_rfc_9449():
    with serve(build()) as client:
        base = str(client.base_url).rstrip("/") + "/"
        uri = f"{base}items"
        good = SIGNER.proof("GET", uri, BOUND)
        cases = {
            "no credentials": ({}, 401, f"Bearer, DPoP {ALGS}", None),
            "stolen token, no proof": (
                {"Authorization": f"DPoP {BOUND}"},
                401,
                f'DPoP error="invalid_dpop_proof", error_description="dpop-proof", {ALGS}',
                "dpop-proof",
            ),
            "bound token as bearer": (
                {"Authorization": f"Bearer {BOUND}"},
                401,
                f'DPoP error="invalid_token", error_description="dpop-binding", {ALGS}',
                "dpop-binding",
            ),
            "proof for another method": (
                {"Authorization": f"DPoP {BOUND}", "DPoP": SIGNER.proof("POST", uri, BOUND)},
                401,
                f'DPoP error="invalid_dpop_proof", error_description="dpop-proof", {ALGS}',
                "dpop-proof",
            ),
            "proof for another URI": (
                {"Authorization": f"DPoP {BOUND}", "DPoP": SIGNER.proof("GET", f"{base}x", BOUND)},
                401,
                f'DPoP error="invalid_dpop_proof", error_description="dpop-proof", {ALGS}',
                "dpop-proof",
            ),
            "proof by another key": (
                {
                    "Authorization": f"DPoP {BOUND}",
                    "DPoP": ProofSigner("ES256", seed=1).proof("GET", uri, BOUND),
                },
                401,
                f'DPoP error="invalid_token", error_description="dpop-binding", {ALGS}',
                "dpop-binding",
            ),
            "bad token with the DPoP scheme": (
                {"Authorization": f"DPoP {tamper(BOUND)}", "DPoP": good},
                401,
                f'DPoP error="invalid_token", error_description="signature", {ALGS}',
                "signature",
            ),
            "unbound token with the DPoP scheme": (
                {
                    "Authorization": f"DPoP {access_token(None)}",
                    "DPoP": SIGNER.proof("GET", uri, access_token(None)),
                },
                401,
                f'DPoP error="invalid_token", error_description="dpop-binding", {ALGS}',
                "dpop-binding",
            ),
            "two proofs": (
                {"Authorization": f"DPoP {BOUND}", "DPoP": f"{good}, {good}"},
                401,
                f'DPoP error="invalid_dpop_proof", error_description="dpop-proof", {ALGS}',
                "dpop-proof",
            ),
        }
        for name, (headers, status, challenge, reason) in cases.items():
            response = _get(client, headers)
            assert response.status_code == status, name
            assert response.headers["www-authenticate"] == challenge, name
            assert response.headers["content-type"] == PROBLEM, name
            if reason is not None:
                assert response.json()["reason"] == reason, name
            # The answer never quotes the token or the proof.
            assert BOUND not in response.text, name
            assert good.split(".")[2] not in response.text, name

        # The good proof is accepted once; sent again it is a replay.
        first = _get(client, {"Authorization": f"DPoP {BOUND}", "DPoP": good})
        again = _get(client, {"Authorization": f"DPoP {BOUND}", "DPoP": good})
    assert first.status_code == 200
    assert again.status_code == 401
    assert again.json()["reason"] == "dpop-replay"
    assert again.headers["www-authenticate"] == (
        f'DPoP error="invalid_dpop_proof", error_description="dpop-replay", {ALGS}'
    )


def test_the_dpop_scheme_path_refuses_query_tokens_and_empty_credentials_with_a_dpop_challenge():
    with serve(build()) as client:
        uri = str(client.base_url).rstrip("/") + "/items"
        headers = {"Authorization": f"DPoP {BOUND}", "DPoP": SIGNER.proof("GET", uri, BOUND)}
        # The DPoP scheme once skipped the query-token check.
        query = client.get("/items?access_token=x", headers=headers)
        # "DPoP " arrives as "DPoP": the server trims the trailing space.
        empty = client.get("/items", headers={"Authorization": "DPoP"})
        lower = client.get("/items", headers={"Authorization": "dpop"})

    assert query.status_code == 400
    assert query.headers["www-authenticate"] == (
        f'DPoP error="invalid_request", error_description="multiple-tokens", {ALGS}'
    )
    # An empty DPoP credential once got a Bearer challenge.
    for response in (empty, lower):
        assert response.status_code == 400
        assert response.headers["www-authenticate"] == (
            f'DPoP error="invalid_request", error_description="empty-token", {ALGS}'
        )
        assert response.json()["reason"] == "empty-token"


def test_required_mode_challenges_with_dpop_only_and_refuses_bearer_tokens():
    dpop = DPoPVerifier("required", algorithms=["ES256", "EdDSA"], clock=lambda: NOW)
    with serve(build(dpop, realm="api")) as client:
        anonymous = client.get("/items")
        bearer = client.get("/items", headers={"Authorization": f"Bearer {access_token(None)}"})

    assert anonymous.headers["www-authenticate"] == 'DPoP realm="api", algs="ES256 EdDSA"'
    assert bearer.status_code == 401
    assert bearer.json()["reason"] == "dpop-binding"


def test_accepted_mode_still_serves_plain_bearer_tokens():
    with serve(build()) as client:
        response = client.get("/items", headers={"Authorization": f"Bearer {access_token(None)}"})

    assert response.status_code == 200


def test_a_full_replay_store_is_a_503_not_a_replay():
    dpop = DPoPVerifier(replay_store=ReplayStore(1, shards=1), clock=lambda: NOW)
    with serve(build(dpop)) as client:
        first = client.get("/items", auth=DPoPAuth(SIGNER, BOUND))
        second = client.get("/items", auth=DPoPAuth(SIGNER, BOUND))

    assert first.status_code == 200
    assert second.status_code == 503
    # The real time until room frees: the first proof's entry, 70 s (issue 33, N22).
    assert second.headers["retry-after"] == "70"


def test_a_key_over_its_replay_quota_is_a_429_for_that_client_alone():
    store = ReplayStore(64, max_per_key=1, shards=1)
    dpop = DPoPVerifier(replay_store=store, clock=lambda: NOW)
    with serve(build(dpop)) as client:
        first = client.get("/items", auth=DPoPAuth(SIGNER, BOUND))
        over = client.get("/items", auth=DPoPAuth(SIGNER, BOUND))

    assert first.status_code == 200
    assert over.status_code == 429
    assert over.headers["retry-after"] == "70"  # until the key's own proof expires
    assert "www-authenticate" not in over.headers
    assert over.json()["reason"] == "dpop-replay-over-quota"


def test_behind_a_proxy_htu_is_the_public_url():
    auth = DPoPAuth(SIGNER, BOUND)
    app = build(public_url="HTTPS://API.example.com:443")
    with serve(app) as client:
        direct = client.get("/items", auth=auth)
        proof = SIGNER.proof("GET", "https://api.example.com/items", BOUND)
        public = client.get("/items", headers={"Authorization": f"DPoP {BOUND}", "DPoP": proof})

    assert direct.status_code == 401  # signed for http://127.0.0.1:<port>/items
    assert public.status_code == 200


def test_a_dpop_bearer_needs_to_know_the_origin_clients_address():
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)
    for mode in ("required", "accepted"):
        with pytest.raises(ConfigurationError) as caught:
            DPoPBearer(verifier, DPoPVerifier(mode))
        for option in ("public_url=", "allowed_hosts=", "trust_host_header=True"):
            assert option in str(caught.value)
    assert DPoPBearer(verifier, DPoPVerifier("off")).dpop.mode == "off"  # htu is never read


@pytest.mark.parametrize(
    "options",
    [
        {"public_url": "https://api.example.com", "trust_host_header": True},
        {"public_url": "https://api.example.com", "allowed_hosts": ["api.example.com"]},
        {"allowed_hosts": []},
        {"allowed_hosts": ["https://api.example.com"]},
        {"allowed_hosts": [5]},
        {"trust_host_header": "yes"},
    ],
    ids=["url-and-trust", "url-and-hosts", "no-hosts", "url-as-host", "not-text", "not-bool"],
)
def test_the_origin_options_are_checked(options: dict[str, Any]):
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)
    with pytest.raises(ConfigurationError):
        DPoPBearer(verifier, DPoPVerifier(), **options)


def test_a_host_header_naming_another_origin_is_refused_with_allowed_hosts():
    # The audit's case: a proof made for another origin, replayed with a Host
    # naming that origin. trust_host_header=True accepts it (the client chose
    # Host); allowed_hosts refuses a Host outside the list.
    def request(client: httpx.Client, host: str) -> httpx.Response:
        proof = SIGNER.proof("GET", f"http://{host}/items", BOUND)
        return client.get(
            "/items", headers={"Authorization": f"DPoP {BOUND}", "DPoP": proof, "Host": host}
        )

    with serve(build(trust_host_header=True)) as trusting:
        assert request(trusting, "api.other.example").status_code == 200
    with serve(build(allowed_hosts=["API.example.com"])) as client:
        other = request(client, "api.other.example")
        listed = request(client, "api.example.com")
        direct = client.get("/items", auth=DPoPAuth(SIGNER, BOUND))  # Host: 127.0.0.1:<port>

    assert listed.status_code == 200
    for refused in (other, direct):
        assert refused.status_code == 401
        assert refused.json()["reason"] == "dpop-proof"


@pytest.mark.parametrize("url", ["ftp://x", "https://api.example.com/base", "not a url"])
def test_public_url_must_be_an_origin(url: str):
    with pytest.raises(ConfigurationError):
        build(public_url=url)


def test_the_openapi_document_describes_the_dpop_scheme():
    with serve(build()) as client:
        document = client.get("/openapi.json").json()

    schemes = document["components"]["securitySchemes"]
    assert schemes["DPoP"]["type"] == "http"
    assert schemes["DPoP"]["scheme"] == "DPoP"
    assert "RFC 9449" in schemes["DPoP"]["description"]
    assert document["paths"]["/items"]["get"]["security"] == [{"DPoP": []}]


def test_optional_variant_keeps_the_dpop_rules():
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)
    auth = DPoPBearer(verifier, DPoPVerifier(clock=lambda: NOW), trust_host_header=True)
    app = FastAPI()
    auth.install(app)

    @app.get("/maybe")
    def maybe(claims: Annotated[Claims | None, Depends(auth.optional)]) -> dict[str, Any]:
        return {"sub": None if claims is None else claims.subject}

    with serve(app) as client:
        anonymous = client.get("/maybe")
        bound_as_bearer = client.get("/maybe", headers={"Authorization": f"Bearer {BOUND}"})
        good = client.get("/maybe", auth=DPoPAuth(SIGNER, BOUND))

    assert anonymous.json() == {"sub": None}
    assert bound_as_bearer.status_code == 401
    assert good.json() == {"sub": "user-1"}


def test_a_plain_jwt_bearer_refuses_a_dpop_bound_token():
    from grelmicro.jwt.fastapi import JWTBearer  # noqa: PLC0415

    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)
    auth = JWTBearer(verifier, realm="api")
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {"sub": claims.subject}

    with serve(app) as client:
        bound = client.get("/items", headers={"Authorization": f"Bearer {BOUND}"})
        plain = client.get("/items", headers={"Authorization": f"Bearer {access_token(None)}"})

    assert bound.status_code == 401
    assert bound.headers["www-authenticate"] == (
        'Bearer realm="api", error="invalid_token", error_description="dpop-binding"'
    )
    assert bound.json()["reason"] == "dpop-binding"
    assert plain.status_code == 200


def test_the_demo_exercises_its_dpop_route(demo: tuple[str, dict[str, str]]):
    _, blocks = demo
    expected = {
        "DPoP: bound token, fresh proof": ("HTTP/1.1 200 OK", '"bound_to":'),
        "DPoP: the same proof again (replay)": (
            "HTTP/1.1 401 Unauthorized",
            'error="invalid_dpop_proof", error_description="dpop-replay"',
        ),
        "DPoP: stolen token, no proof": (
            "HTTP/1.1 401 Unauthorized",
            'error="invalid_dpop_proof", error_description="dpop-proof"',
        ),
        "DPoP: the bound token sent as a bearer token": (
            "HTTP/1.1 401 Unauthorized",
            'error="invalid_token", error_description="dpop-binding"',
        ),
    }
    for title, (status, detail) in expected.items():
        block = blocks[title]
        assert "GET /dpop/items" in block
        assert status in block, block
        assert detail in block, block


def test_the_former_module_re_exports_the_same_objects() -> None:
    import grelmicro.jwt.fastapi as fastapi  # noqa: PLC0415
    import grelmicro.jwt.fastapi_dpop as former  # noqa: PLC0415

    assert former.__all__ == ["DPoPBearer", "DPoPBinding"]
    assert set(former.__all__) <= set(fastapi.__all__)
    for name in former.__all__:
        assert getattr(former, name) is getattr(fastapi, name), name
    assert fastapi.DPoPBearer is DPoPBearer
    assert fastapi.DPoPBinding.__module__ == "grelmicro.jwt.fastapi._dpop"
