"""Attack class: a policy that grants or checks less than it says.

Issue 24, findings 4 and 5 and three info items:

- Scopes are read by one parser (RFC 6749 §3.3) for ``Claims`` and for the
  FastAPI route: a ``scope`` string is split on U+0020 only, an item outside
  the scope-token grammar grants nothing, ``scope`` wins over ``scp`` (never
  their union), ``scp`` arrays are read the same way everywhere. A token
  with ``"a\\tb"`` or ``"a\\u3000b"`` grants neither ``a`` nor ``b``.
- ``Issuer(required=[...])`` adds to the verifier's required claims: under
  ``access_token_profile()`` it keeps ``sub``, ``client_id``, ``iat`` and
  ``jti``; an issuer setting that checks less than the verifier's needs
  ``allow_weaker`` naming it.
- ``jwks_url=`` without ``issuer=`` warns when built (``iss`` is then never
  checked); a private key published in a fetched JWKS is skipped and logged
  at WARNING, without its private members.
- The claims payload is read-only to callers: no mutable dict reachable
  from a ``Claims`` changes what the next request (a cache hit) or another
  thread sees.

References: RFC 6749 §3.3, RFC 8693 §4.2, RFC 9068 §2.2 §4, RFC 8725 §3.8,
RFC 7517 §4 (private members), CWE-285 (improper authorization), CWE-1188
(insecure default), CWE-362/CWE-471 (shared state modified).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import forge
import pytest
import support
from fastapi import FastAPI, Security

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    Issuer,
    JWTVerifier,
    Key,
    MissingClaimError,
    access_token_profile,
)
from grelmicro.jwt.fastapi import JWTBearer

NOW = forge.NOW
SECRET = b"security-suite-policy-issuer-secret-01"
ISS = "https://idp.example.com/"
AUD = "https://api.example.com"


def mint(body: dict[str, Any], typ: str = "JWT") -> str:
    return forge.mint({"alg": "HS256", "typ": typ}, body, SECRET)


def hs_key() -> Key:
    return Key.secret(SECRET, "HS256")


# -- one scope parser -------------------------------------------------------------------

#: (claims granting scopes, a scope asked for, granted?)
SCOPE_CASES: list[tuple[str, dict[str, Any], str, bool]] = [
    ("space", {"scope": "a b"}, "a", True),
    ("space-second", {"scope": "a b"}, "b", True),
    ("double-space", {"scope": "a  b"}, "b", True),
    ("tab", {"scope": "a\tb"}, "a", False),
    ("tab-second", {"scope": "a\tb"}, "b", False),
    ("ideographic-space", {"scope": "a\u3000b"}, "a", False),
    ("no-break-space", {"scope": "a\u00a0b"}, "a", False),
    ("em-space", {"scope": "a\u2003b"}, "b", False),
    ("newline", {"scope": "a\nb"}, "a", False),
    ("vertical-tab", {"scope": "a\x0bb"}, "a", False),
    ("unit-separator", {"scope": "a\x1fb"}, "a", False),
    ("line-separator", {"scope": "admin\u2028read"}, "admin", False),
    ("quote-in-item", {"scope": 'a "b"'}, '"b"', False),
    ("backslash-in-item", {"scope": "a b\\c"}, "b\\c", False),
    ("scope-with-tab-keeps-good-items", {"scope": "read a\tb"}, "read", True),
    ("scp-string", {"scp": "a b"}, "a", True),
    ("scp-string-tab", {"scp": "a\tb"}, "a", False),
    ("scp-array", {"scp": ["a", "b"]}, "b", True),
    ("scp-array-item-with-space", {"scp": ["a b"]}, "a", False),
    ("scp-array-item-with-tab", {"scp": ["x", "a\tb"]}, "a", False),
    ("scp-array-non-strings", {"scp": [1, None, {"a": 1}, ["a"]]}, "a", False),
    ("scope-array", {"scope": ["a", "b"]}, "a", True),
    ("scope-wins-over-scp", {"scope": "read", "scp": ["admin"]}, "admin", False),
    ("scope-wins-even-empty", {"scope": "", "scp": ["admin"]}, "admin", False),
    ("scope-null-reads-scp", {"scope": None, "scp": ["admin"]}, "admin", True),
    ("scope-number", {"scope": 1}, "1", False),
    ("scope-object", {"scope": {"a": True}}, "a", False),
    ("empty-item", {"scope": "a  "}, "", False),
]
SCOPE_IDS = [case[0] for case in SCOPE_CASES]


def scoped_app(required: str, **options: Any) -> FastAPI:
    auth = JWTBearer(JWTVerifier([hs_key()], cache_size=0, clock=lambda: NOW), **options)
    app = FastAPI()
    auth.install(app)

    @app.get("/guarded")
    def guarded(claims: Claims = Security(auth, scopes=[required])) -> dict[str, Any]:  # noqa: B008
        return {"sub": claims.subject}

    return app


@pytest.mark.parametrize(("name", "claims", "wanted", "granted"), SCOPE_CASES, ids=SCOPE_IDS)
def test_claims_and_the_route_grant_the_same_scopes(
    name: str, claims: dict[str, Any], wanted: str, granted: bool
):
    token = mint(support.payload(**claims))
    verified = JWTVerifier([hs_key()], cache_size=0).verify(token, now=NOW)
    assert verified.has_scopes(wanted) is granted, name
    assert (wanted in verified.scopes) is granted, name
    if not wanted:
        return  # a route cannot ask for the empty scope
    response = support.call(scoped_app(wanted), "/guarded", {"Authorization": f"Bearer {token}"})
    if granted:
        assert response.status_code == 200, response.text
    else:
        support.refused_with(response, 403, "insufficient-scope")


@pytest.mark.parametrize(
    ("claims", "wanted", "granted"),
    [
        ({"permissions": ["a"]}, "a", True),
        ({"permissions": ["a\tb"]}, "a", False),
        ({"permissions": "a\u3000b"}, "a", False),
        ({"scope": "x", "permissions": ["a"]}, "a", True),
    ],
    ids=["array", "array-item-with-tab", "string-with-ideographic-space", "with-scope"],
)
def test_permissions_are_read_with_the_same_rules(
    claims: dict[str, Any], wanted: str, granted: bool
):
    token = mint(support.payload(**claims))
    verified = JWTVerifier([hs_key()], cache_size=0).verify(token, now=NOW)
    assert verified.has_scopes(wanted, permissions=True) is granted
    assert not verified.has_scopes(wanted) or "scope" in claims
    app = scoped_app(wanted, permissions=True)
    response = support.call(app, "/guarded", {"Authorization": f"Bearer {token}"})
    assert response.status_code == (200 if granted else 403)


# -- per-issuer required= adds, never replaces ----------------------------------------

ACCESS: dict[str, Any] = {
    "iss": ISS,
    "exp": NOW + 300,
    "aud": AUD,
    "sub": "user-1",
    "client_id": "app-1",
    "iat": NOW,
    "jti": "t-1",
    "scope": "read",
}


def access_token(*missing: str) -> str:
    return mint({k: v for k, v in ACCESS.items() if k not in missing}, typ="at+jwt")


def profile_verifier(**issuer_policy: Any) -> JWTVerifier:
    return JWTVerifier(
        issuers=[Issuer(ISS, keys=[hs_key()], **issuer_policy)],
        config=access_token_profile(audience=AUD, cache_size=0),
    )


@pytest.mark.parametrize("required", [["scope"], ["sub"], ["tenant"], "scope"])
@pytest.mark.parametrize("claim", ["sub", "client_id", "iat", "jti", "exp", "iss", "aud"])
def test_issuer_required_keeps_the_profiles_claims(required: Any, claim: str):
    verifier = profile_verifier(required=required)
    token = access_token(claim)
    error = support.reject(verifier, token, "missing-claim")
    assert isinstance(error, MissingClaimError)
    assert error.claim == claim


def test_issuer_required_adds_its_own_claims():
    verifier = profile_verifier(required=["scope"])
    assert support.accept(verifier, access_token())["scope"] == "read"
    support.reject(verifier, access_token("scope"), "missing-claim")


@pytest.mark.parametrize(
    ("policy", "setting"),
    [
        ({"require_exp": False}, "require_exp"),
        ({"typ": "JWT"}, "typ"),
        ({"audience": []}, "audience"),
    ],
    ids=["require-exp", "typ", "audience"],
)
def test_an_issuer_weakening_the_profile_needs_allow_weaker(policy: dict[str, Any], setting: str):
    with pytest.raises(ConfigurationError) as caught:
        profile_verifier(**policy)
    assert "allow_weaker" in str(caught.value)
    assert setting in str(caught.value)


def test_allow_weaker_is_needed_to_replace_the_profiles_claims():
    # Named explicitly, required= replaces the profile's list (exp stays require_exp's).
    verifier = profile_verifier(required=["sub"], allow_weaker=["required"])
    assert support.accept(verifier, access_token("client_id", "iat", "jti"))["sub"] == "user-1"
    support.reject(verifier, access_token("exp"), "missing-claim")
    # Not named: the same issuer keeps every claim of the profile.
    support.reject(profile_verifier(required=["sub"]), access_token("jti"), "missing-claim")


def test_allow_weaker_names_a_real_setting():
    for names in (["requierd"], ["issuer"], [1], "required,typ"):
        with pytest.raises(ConfigurationError):
            Issuer(ISS, keys=[hs_key()], allow_weaker=names)


# -- network keys: issuer check and published private keys ---------------------------------


@contextlib.contextmanager
def jwks_server(document: dict[str, Any]) -> Iterator[str]:
    """A JWKS served over HTTP on 127.0.0.1; its URL."""
    body = json.dumps(document).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


RING = forge.KeyRing()


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("grelmicro") and r.levelno == level]


def test_jwks_url_without_issuer_warns_once_when_built(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger="grelmicro.jwt")
    with jwks_server({"keys": [forge.jwk(RING.p256.public_key(), kid="k")]}) as url:
        JWTVerifier(jwks_url=url, allow_insecure_loopback=True, audience=AUD).close()
        warnings = [r for r in _records(caplog, logging.WARNING) if "issuer" in r.getMessage()]
        assert len(warnings) == 1
        caplog.clear()
        JWTVerifier(jwks_url=url, allow_insecure_loopback=True, issuer=ISS).close()
        assert not [r for r in _records(caplog, logging.WARNING) if "issuer" in r.getMessage()]


def test_a_published_private_key_is_skipped_at_warning(caplog: pytest.LogCaptureFixture):
    leaked = forge.private_jwk(RING.rsa, kid="leaked", alg="RS256")
    good = forge.jwk(RING.p256.public_key(), kid="good", alg="ES256")
    caplog.set_level(logging.DEBUG, logger="grelmicro.jwt")
    with jwks_server({"keys": [leaked, good]}) as url:
        verifier = JWTVerifier(jwks_url=url, allow_insecure_loopback=True, issuer=ISS, cache_size=0)
        with verifier:
            ok = forge.mint({"alg": "ES256", "kid": "good"}, support.payload(iss=ISS), RING.p256)
            assert verifier.verify(ok, now=NOW).subject == "user-1"
            # The leaked key verifies nothing: a token it signed is refused (the
            # verifier holds no RS256 key, so RS256 is not an allowed algorithm).
            body = support.payload(iss=ISS)
            forged = forge.mint({"alg": "RS256", "kid": "leaked"}, body, RING.rsa)
            support.reject(verifier, forged, "algorithm")
    warnings = [r.getMessage() for r in _records(caplog, logging.WARNING)]
    assert any("'leaked'" in m and "private key" in m for m in warnings), warnings
    for member in ("d", "p", "q", "dp", "dq", "qi"):
        assert leaked[member][:16] not in caplog.text


# -- claims are read-only to callers -----------------------------------------------------


def _reachable_containers(claims: Claims) -> list[Any]:
    """Mutable containers a caller reaches from ``claims`` through its attributes."""
    found: list[Any] = []
    names: list[str] = []
    for cls in type(claims).__mro__:
        names.extend(getattr(cls, "__slots__", ()))
    values = [getattr(claims, name) for name in names if hasattr(claims, name)]
    values.extend(getattr(claims, "__dict__", {}).values())
    for value in values:
        if isinstance(value, (dict, list, set, bytearray)):
            found.append(value)
    return found


def _tamper_with(container: Any) -> None:
    if isinstance(container, dict):
        container["sub"] = "admin"
        container["roles"] = ("admin",)
    elif isinstance(container, (list, set)):
        container.clear()
    elif isinstance(container, bytearray):
        container[:] = b""


@pytest.mark.parametrize("mode", ["digest", "token"])
def test_no_mutable_payload_is_shared_between_requests(mode: str):
    verifier = JWTVerifier([hs_key()], cache_key=mode, cache_stats=True, clock=lambda: NOW)
    token = mint(support.payload(roles=["user"]))
    first = verifier.verify(token)
    for container in _reachable_containers(first):
        _tamper_with(container)
    again = verifier.verify(token)
    assert verifier.cache_info().hits == 1
    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(verifier.verify(token)))
    thread.start()
    thread.join()
    for claims in (again, seen[0]):
        assert claims.subject == "user-1"
        assert claims["roles"] == ("user",)
