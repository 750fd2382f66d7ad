"""Attack class: sender-constrained tokens replayed as bearer tokens, and DPoP's origin.

Issue 24, findings 2 and 3, and the header-parsing quirks of its info items,
through the FastAPI dependency as a server calls it (in process, through
``httpx.ASGITransport``: the client chooses every header, ``Host``
included).

- A token bound by a confirmation method the route does not check
  (``cnf.x5t#S256``, ``cnf.jwk``, ``cnf.kid``, any other member) is refused:
  ``unchecked-binding`` (``dpop-binding`` for ``cnf.jkt``), never accepted
  as a plain bearer token; a ``cnf`` that cannot be read is ``binding``.
- RFC 8705 certificate-bound tokens (``CertificateBinding``): the
  ``x5t#S256`` thumbprint must be the client certificate's, taken from the
  server's TLS extension or from a header named as trusted, never from a
  header the binding was not told to trust.
- ``DPoPBearer`` needs the origin clients address (``public_url``,
  ``allowed_hosts`` or an explicit ``trust_host_header=True``): building one
  without is a ``ConfigurationError``, and a proof made for another origin
  is refused even when the request's ``Host`` names that origin.
- Whitespace around the scheme still reads the credentials, an escaped
  ``access_token`` query name is still a query token, the ``DPoP`` scheme
  path refuses query tokens too, an empty ``DPoP`` credential gets a DPoP
  challenge.

References: RFC 7800 §3.1, RFC 8705 §3 §3.1 §7.2, RFC 9449 §4.3 §7.1 §7.2
§11.1, RFC 6750 §2.3 §3.1 §5.3, RFC 9110 §5.6.3 §11.4.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

import forge
import pytest
import support
from dpop_proofs import ProofSigner
from fastapi import Depends, FastAPI

from grelmicro.jwt import Claims, ConfigurationError, DPoPVerifier, JWTVerifier, Key
from grelmicro.jwt.fastapi import CertificateBinding, JWTBearer
from grelmicro.jwt.fastapi_dpop import DPoPBearer, DPoPBinding

NOW = forge.NOW
ORIGIN = support.ORIGIN
ISSUER_SECRET = b"security-suite-bindings-issuer-secret-1"
RING = forge.KeyRing()
CLIENT = ProofSigner("ES256", seed=200)


#: The peer httpx's ASGI transport reports: the proxy, in these cases.
PROXIES = ["127.0.0.1"]


def token(**claims: Any) -> str:
    return forge.mint({"alg": "HS256", "typ": "at+jwt"}, support.payload(**claims), ISSUER_SECRET)


def verifier() -> JWTVerifier:
    return JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0, clock=lambda: NOW)


def app_for(auth: JWTBearer) -> FastAPI:
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Claims = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        return {"sub": claims.subject}

    return app


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def _der(pem: bytes) -> bytes:
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import Encoding  # noqa: PLC0415

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


CERT = forge.certificate_pem(RING.p256, "client-a")
OTHER_CERT = forge.certificate_pem(RING.other_p256, "client-b")
X5T = forge.b64url(hashlib.sha256(_der(CERT)).digest())
JWK_CNF = forge.jwk(RING.p256.public_key())

#: cnf values a route without bindings must refuse, and the reason it answers.
BOUND: dict[str, tuple[dict[str, Any], str]] = {
    "x5t#S256": ({"x5t#S256": X5T}, "unchecked-binding"),
    "jwk": ({"jwk": JWK_CNF}, "unchecked-binding"),
    "kid": ({"kid": "client-key-1"}, "unchecked-binding"),
    "jwe": ({"jwe": "eyJhbGciOiJSU0EtT0FFUCJ9.x.y.z.w"}, "unchecked-binding"),
    "jku": ({"jku": "https://client.example/jwks.json", "kid": "k"}, "unchecked-binding"),
    "unknown-member": ({"urn:example:binding": {"v": 1}}, "unchecked-binding"),
    "unknown-empty-value": ({"x": None}, "unchecked-binding"),
    "jkt": ({"jkt": CLIENT.jkt}, "dpop-binding"),
    "jkt-and-x5t": ({"jkt": CLIENT.jkt, "x5t#S256": X5T}, "dpop-binding"),
    "x5t-and-jwk": ({"x5t#S256": X5T, "jwk": JWK_CNF}, "unchecked-binding"),
}

#: cnf values that cannot be read: refused as ``binding``, whatever the route checks.
UNREADABLE: dict[str, Any] = {
    "string": "x5t#S256",
    "array": [{"jkt": CLIENT.jkt}],
    "number": 1,
    "empty-object": {},
    "null-jkt": {"jkt": None},
    "empty-jkt": {"jkt": ""},
    "numeric-jkt": {"jkt": 5},
    "short-x5t": {"x5t#S256": "abc"},
    "padded-x5t": {"x5t#S256": X5T + "="},
    "hex-x5t": {"x5t#S256": hashlib.sha256(_der(CERT)).hexdigest()},
    "x5t-array": {"x5t#S256": [X5T]},
}


# -- a route with no binding: every bound token refused --------------------------------


def test_positive_control_an_unbound_token_is_served():
    response = support.call(app_for(JWTBearer(verifier())), "/items", bearer(token()))
    assert (response.status_code, response.json()) == (200, {"sub": "user-1"})


@pytest.mark.parametrize("name", sorted(BOUND))
def test_a_bound_token_is_never_a_bearer_token(name: str):
    cnf, reason = BOUND[name]
    response = support.call(app_for(JWTBearer(verifier())), "/items", bearer(token(cnf=cnf)))
    challenge = support.refused_with(response, 401, reason)
    assert challenge.startswith('Bearer error="invalid_token"')


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_an_unreadable_cnf_is_refused(name: str):
    app = app_for(
        JWTBearer(
            verifier(),
            bindings=[CertificateBinding(trusted_header="X-Cert", trusted_proxies=PROXIES)],
        )
    )
    headers = {**bearer(token(cnf=UNREADABLE[name])), "X-Cert": quote(CERT.decode())}
    support.refused_with(support.call(app, "/items", headers), 401, "binding")


@pytest.mark.parametrize("name", ["x5t#S256", "jwk", "kid", "unknown-member", "x5t-and-jwk"])
def test_a_dpop_route_refuses_the_other_methods(name: str):
    """A route checking DPoP does not check a certificate or a jwk: still refused."""
    cnf = {**BOUND[name][0], "jkt": CLIENT.jkt}
    bound = token(cnf=cnf)
    auth = DPoPBearer(verifier(), DPoPVerifier(clock=lambda: NOW), public_url=ORIGIN)
    headers = {
        "Authorization": f"DPoP {bound}",
        "DPoP": CLIENT.proof("GET", f"{ORIGIN}/items", bound),
    }
    support.refused_with(support.call(app_for(auth), "/items", headers), 401, "unchecked-binding")


def test_a_dpop_route_serves_a_token_bound_by_jkt_alone():
    bound = token(cnf={"jkt": CLIENT.jkt})
    auth = DPoPBearer(verifier(), DPoPVerifier(clock=lambda: NOW), public_url=ORIGIN)
    headers = {
        "Authorization": f"DPoP {bound}",
        "DPoP": CLIENT.proof("GET", f"{ORIGIN}/items", bound),
    }
    assert support.call(app_for(auth), "/items", headers).status_code == 200


# -- RFC 8705: certificate-bound tokens ----------------------------------------------------

CERT_TOKEN = token(cnf={"x5t#S256": X5T})


def cert_app(**options: Any) -> FastAPI:
    return app_for(JWTBearer(verifier(), bindings=[CertificateBinding(**options)]))


def with_tls(app: FastAPI, chain: list[str]) -> Any:
    """``app`` behind a server that implements the ASGI TLS extension with ``chain``."""

    async def server(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            extensions = dict(scope.get("extensions") or {})
            extensions["tls"] = {"client_cert_chain": chain, "tls_version": 0x0304}
            scope = {**scope, "extensions": extensions}
        await app(scope, receive, send)

    return server


def test_the_certificate_from_the_trusted_header_is_checked():
    app = cert_app(trusted_header="X-Client-Cert", trusted_proxies=PROXIES)
    good = support.call(app, "/items", {**bearer(CERT_TOKEN), "X-Client-Cert": quote(CERT)})
    assert (good.status_code, good.json()) == (200, {"sub": "user-1"})
    cases = {
        "another certificate": [("X-Client-Cert", quote(OTHER_CERT))],
        "no certificate": [],
        "two certificates": [("X-Client-Cert", quote(CERT)), ("X-Client-Cert", quote(CERT))],
        "an empty header": [("X-Client-Cert", "")],
        "not a certificate": [("X-Client-Cert", "-----BEGIN CERTIFICATE-----")],
        "the thumbprint itself": [("X-Client-Cert", X5T)],
    }
    for what, extra in cases.items():
        headers = [("Authorization", f"Bearer {CERT_TOKEN}"), *extra]
        response = support.call(app, "/items", headers)
        assert response.status_code == 401, what
        support.refused_with(response, 401, "certificate-binding")


def test_a_header_the_binding_was_not_told_to_trust_is_ignored():
    """Any client can send X-Client-Cert; only a proxy that sets it may be trusted."""
    for app in (cert_app(), cert_app(trusted_header="X-SSL-Client-Cert", trusted_proxies=PROXIES)):
        headers = {**bearer(CERT_TOKEN), "X-Client-Cert": quote(CERT)}
        support.refused_with(support.call(app, "/items", headers), 401, "certificate-binding")


def test_the_tls_extension_certificate_is_checked():
    good = support.call(with_tls(cert_app(), [CERT.decode()]), "/items", bearer(CERT_TOKEN))
    assert good.status_code == 200
    for chain in ([OTHER_CERT.decode()], [], [OTHER_CERT.decode(), CERT.decode()]):
        response = support.call(with_tls(cert_app(), chain), "/items", bearer(CERT_TOKEN))
        support.refused_with(response, 401, "certificate-binding")


def test_an_envoy_xfcc_header_is_read_when_trusted():
    xfcc = f'By=spiffe://api;Hash=00;Cert="{quote(CERT)}";Subject="CN=client-a"'
    app = cert_app(
        trusted_header="X-Forwarded-Client-Cert", trusted_proxies=PROXIES, header_format="xfcc"
    )
    ok = support.call(app, "/items", {**bearer(CERT_TOKEN), "X-Forwarded-Client-Cert": xfcc})
    assert ok.status_code == 200
    other = xfcc.replace(quote(CERT), quote(OTHER_CERT))
    response = support.call(app, "/items", {**bearer(CERT_TOKEN), "X-Forwarded-Client-Cert": other})
    support.refused_with(response, 401, "certificate-binding")


def test_a_certificate_route_still_refuses_dpop_and_other_methods():
    app = cert_app(trusted_header="X-Client-Cert", trusted_proxies=PROXIES)
    for name, reason in (("jkt-and-x5t", "dpop-binding"), ("x5t-and-jwk", "unchecked-binding")):
        headers = {**bearer(token(cnf=BOUND[name][0])), "X-Client-Cert": quote(CERT)}
        support.refused_with(support.call(app, "/items", headers), 401, reason)


def test_required_certificate_binding_refuses_unbound_tokens():
    app = cert_app(trusted_header="X-Client-Cert", trusted_proxies=PROXIES, required=True)
    headers = {**bearer(token()), "X-Client-Cert": quote(CERT)}
    support.refused_with(support.call(app, "/items", headers), 401, "certificate-binding")


# -- DPoP's origin: fail closed ----------------------------------------------------------


@pytest.mark.parametrize("mode", [None, "required", "accepted"])
def test_dpop_without_an_origin_is_a_configuration_error(mode: str | None):
    dpop = None if mode is None else DPoPVerifier(mode)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError) as caught:
        DPoPBearer(verifier(), dpop)
    assert type(caught.value) is ConfigurationError
    message = str(caught.value)
    for option in ("public_url", "allowed_hosts", "trust_host_header"):
        assert option in message
    with pytest.raises(ConfigurationError):
        DPoPBinding(dpop)


def test_dpop_off_needs_no_origin():
    DPoPBearer(verifier(), DPoPVerifier("off"))


@pytest.mark.parametrize(
    "options",
    [
        {"public_url": ORIGIN, "allowed_hosts": ["api.example.com"]},
        {"public_url": ORIGIN, "trust_host_header": True},
        {"public_url": f"{ORIGIN}/api"},
        {"public_url": "api.example.com"},
        {"public_url": "ftp://api.example.com"},
        {"allowed_hosts": []},
        {"allowed_hosts": [""]},
        {"allowed_hosts": [ORIGIN]},
        {"allowed_hosts": ["api.example.com evil.example"]},
        {"allowed_hosts": ["user@api.example.com"]},
        {"trust_host_header": "yes"},
    ],
    ids=[
        "url-and-hosts",
        "url-and-trust",
        "url-with-path",
        "url-without-scheme",
        "url-not-http",
        "no-hosts",
        "empty-host",
        "host-as-url",
        "host-with-space",
        "host-with-userinfo",
        "trust-not-bool",
    ],
)
def test_an_ambiguous_origin_is_a_configuration_error(options: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        DPoPBearer(verifier(), DPoPVerifier(), **options)


ATTACKER_ORIGIN = "https://attacker.example"
DPOP_TOKEN = token(cnf={"jkt": CLIENT.jkt})


def dpop_request(app: FastAPI, htu: str, host: str) -> Any:
    headers = {
        "Authorization": f"DPoP {DPOP_TOKEN}",
        "DPoP": CLIENT.proof("GET", htu, DPOP_TOKEN),
        "Host": host,
    }
    return support.call(app, "/items", headers)


def dpop_app(**origin: Any) -> FastAPI:
    return app_for(DPoPBearer(verifier(), DPoPVerifier(clock=lambda: NOW), **origin))


@pytest.mark.parametrize(
    "origin",
    [{"public_url": ORIGIN}, {"allowed_hosts": ["api.example.com"]}],
    ids=["public-url", "allowed-hosts"],
)
def test_a_proof_for_another_origin_is_refused_when_host_names_it(origin: dict[str, Any]):
    """A proof captured at attacker.example replayed here with ``Host: attacker.example``."""
    app = dpop_app(**origin)
    ours = dpop_request(app, f"{ORIGIN}/items", "api.example.com")
    assert (ours.status_code, ours.json()) == (200, {"sub": "user-1"})
    theirs = dpop_request(app, f"{ATTACKER_ORIGIN}/items", "attacker.example")
    challenge = support.refused_with(theirs, 401, "dpop-proof")
    assert challenge.startswith('DPoP error="invalid_dpop_proof"')


def test_public_url_is_what_htu_is_compared_with_whatever_host_says():
    app = dpop_app(public_url=ORIGIN)
    response = dpop_request(app, f"{ORIGIN}/items", "attacker.example")
    assert response.status_code == 200


def test_allowed_hosts_refuse_a_host_not_listed_even_with_a_matching_proof():
    app = dpop_app(allowed_hosts=["api.example.com", "api.example.com:8443"])
    response = dpop_request(app, "https://internal.example/items", "internal.example")
    support.refused_with(response, 401, "dpop-proof")
    upper = dpop_request(app, f"{ORIGIN}/items", "API.EXAMPLE.COM")  # host names have no case
    assert upper.status_code == 200


# -- header parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["Bearer\t{t}", "Bearer \t {t}", "bearer\t\t{t}", "Bearer {t}\t"],
    ids=["tab", "mixed", "two-tabs", "trailing-tab"],
)
def test_whitespace_around_the_scheme_still_reads_the_token(value: str):
    """Read as no credentials, a bad token would get the anonymous answer, not its refusal."""
    app = app_for(JWTBearer(verifier()))
    good = support.call(app, "/items", [("Authorization", value.format(t=token()))])
    assert good.status_code == 200
    bad = support.call(app, "/items", [("Authorization", value.format(t=forge.tamper(token())))])
    support.refused_with(bad, 401, "signature")


@pytest.mark.parametrize(
    "query",
    ["access%5Ftoken=x", "access%5ftoken=x", "%61ccess_token=x", "a=1&access%5Ftoken="],
    ids=["escaped-underscore", "lower-case-escape", "escaped-letter", "second-pair"],
)
def test_an_escaped_query_token_is_still_a_query_token(query: str):
    app = app_for(JWTBearer(verifier()))
    support.refused_with(support.call(app, f"/items?{query}"), 400, "query-token")
    with_header = support.call(app, f"/items?{query}", bearer(token()))
    support.refused_with(with_header, 400, "multiple-tokens")


def test_the_dpop_scheme_refuses_query_tokens_and_empty_credentials_with_a_dpop_challenge():
    app = dpop_app(public_url=ORIGIN)
    headers = {
        "Authorization": f"DPoP {DPOP_TOKEN}",
        "DPoP": CLIENT.proof("GET", f"{ORIGIN}/items", DPOP_TOKEN),
    }
    query = support.call(app, "/items?access_token=x", headers)
    assert support.refused_with(query, 400, "multiple-tokens").startswith(
        'DPoP error="invalid_request"'
    )
    for value in ("DPoP", "dpop", "DPoP \t"):
        empty = support.call(app, "/items", [("Authorization", value)])
        assert support.refused_with(empty, 400, "empty-token").startswith(
            'DPoP error="invalid_request"'
        )
