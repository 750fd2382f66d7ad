"""RFC 8705 certificate-bound tokens through a real uvicorn with TLS and client certificates.

A throwaway CA, a server certificate for 127.0.0.1 and two client
certificates are made here with ``cryptography``. uvicorn (0.54) checks the
client certificate but does not hand it to the app; the first server below
runs uvicorn's own h11 protocol with the ASGI TLS extension added from the
TLS connection (what a server implementing the extension does), the second
runs plain uvicorn: a certificate-bound token is then refused, never taken
as a bearer token. The trusted-proxy header path runs over plain HTTP.
"""

import asyncio
import datetime
import ipaddress
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import Depends, FastAPI

pytest.importorskip("cryptography", reason="the certificates are made with cryptography")

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from daemons import free_port
from forge import NOW, SECRET, certificate_builder, hmac_key
from servers import ca_key_usage, serve
from uvicorn.protocols.http.h11_impl import H11Protocol

from grelmicro.jwt import Claims, ConfigurationError, JWTVerifier, Key
from grelmicro.jwt.fastapi import CertificateBinding, JWTBearer, certificate_thumbprint

PEM = serialization.Encoding.PEM


# -- certificates ----------------------------------------------------------------------


@dataclass
class Party:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(PEM)

    def write(self, folder: Path, name: str) -> tuple[Path, Path]:
        cert, key = folder / f"{name}.pem", folder / f"{name}.key"
        cert.write_bytes(self.pem)
        key.write_bytes(
            self.key.private_bytes(
                PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert, key


def _issue(name: str, ca: Party | None, usage: x509.ObjectIdentifier | None) -> Party:
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = certificate_builder(
        name,
        key.public_key(),
        not_before=now - datetime.timedelta(minutes=5),
        not_after=now + datetime.timedelta(days=1),
        issuer=None if ca is None else ca.cert.subject.rfc4514_string().removeprefix("CN="),
    ).add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == x509.oid.ExtendedKeyUsageOID.SERVER_AUTH:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    # Key identifiers and the CA's key usage, as Python 3.13's strict
    # verification (VERIFY_X509_STRICT) requires of a chain: the CA names its
    # own key and may sign certificates, each leaf names its issuer's key.
    if ca is None:
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        ).add_extension(ca_key_usage(), critical=True)
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    signer = key if ca is None else ca.key
    return Party(builder.sign(signer, hashes.SHA256()), key)


@dataclass
class PKI:
    folder: Path
    ca: Party
    server: Party
    alice: Party
    mallory: Party

    def client(self, party: Party, base_url: str) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.folder / "ca.pem"))
        context.load_cert_chain(*party.write(self.folder, party.cert.subject.rfc4514_string()))
        return httpx.Client(base_url=base_url, verify=context, timeout=10)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    folder = tmp_path_factory.mktemp("pki")
    ca = _issue("grelmicro mtls CA", None, None)
    client_auth = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
    pki = PKI(
        folder,
        ca,
        _issue("127.0.0.1", ca, x509.oid.ExtendedKeyUsageOID.SERVER_AUTH),
        _issue("alice", ca, client_auth),
        _issue("mallory", ca, client_auth),
    )
    (folder / "ca.pem").write_bytes(ca.pem)
    pki.server.write(folder, "server")
    return pki


# -- a uvicorn with TLS ------------------------------------------------------------------


class TLSExtensionProtocol(H11Protocol):
    """uvicorn's h11 protocol, adding the ASGI TLS extension from the TLS connection."""

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
        if der is None:
            return
        chain = [ssl.DER_cert_to_PEM_cert(der)]
        app = self.app

        async def with_tls(scope: Any, receive: Any, send: Any) -> None:
            scope.setdefault("extensions", {})["tls"] = {"client_cert_chain": chain}
            await app(scope, receive, send)

        self.app = with_tls


@contextmanager
def serve_tls(app: FastAPI, pki: PKI, protocol: type[H11Protocol] = H11Protocol) -> Iterator[str]:
    """``app`` under uvicorn over TLS on 127.0.0.1, client certificates required."""
    import uvicorn  # noqa: PLC0415

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level="critical",
        ssl_certfile=str(pki.folder / "server.pem"),
        ssl_keyfile=str(pki.folder / "server.key"),
        ssl_ca_certs=str(pki.folder / "ca.pem"),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[listener])), daemon=True
    )
    thread.start()
    for _ in range(1000):
        if server.started:
            break
        thread.join(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


# -- the app -------------------------------------------------------------------------------

AUDIENCE = "https://api.example.com"
#: The test clients' address: the proxy, for the tests where no real proxy runs.
LOOPBACK = ["127.0.0.1"]


def mint(**claims: Any) -> str:
    claims.setdefault("aud", AUDIENCE)
    claims.setdefault("sub", "user-1")
    claims.setdefault("exp", NOW + 3600)
    return hmac_key().mint(claims)


def bound_to(party: Party) -> str:
    return mint(cnf={"x5t#S256": certificate_thumbprint(party.der)})


def build(*bindings: CertificateBinding) -> FastAPI:
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], audience=AUDIENCE, clock=lambda: NOW)
    auth = JWTBearer(verifier, realm="api", bindings=bindings)
    strict = JWTBearer(
        verifier,
        realm="api",
        bindings=[
            CertificateBinding(
                trusted_header=None if not bindings else _header_of(bindings[0]),
                trusted_proxies=None if not bindings else _proxies_of(bindings[0]),
                required=True,
            )
        ],
    )
    app = FastAPI()
    auth.install(app)

    @app.get("/me")
    def me(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {"sub": claims.subject}

    @app.get("/strict")
    def only_bound(claims: Annotated[Claims, Depends(strict)]) -> dict[str, Any]:
        return {"sub": claims.subject}

    return app


def _header_of(binding: CertificateBinding) -> str | None:
    return None if binding.trusted_header is None else binding.trusted_header.decode()


def _proxies_of(binding: CertificateBinding) -> list[str] | None:
    return [str(network) for network in binding.trusted_proxies] or None


def bearer(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


def reason(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    said = str(response.json()["reason"])
    assert response.headers["www-authenticate"] == (
        f'Bearer realm="api", error="invalid_token", error_description="{said}"'
    )
    return said


# -- through TLS ---------------------------------------------------------------------------


def test_a_certificate_bound_token_is_accepted_from_its_certificate_only(pki: PKI):
    with serve_tls(build(CertificateBinding()), pki, TLSExtensionProtocol) as url:
        with pki.client(pki.alice, url) as alice, pki.client(pki.mallory, url) as mallory:
            own = alice.get("/me", headers=bearer(bound_to(pki.alice)))
            stolen = mallory.get("/me", headers=bearer(bound_to(pki.alice)))
            plain = mallory.get("/me", headers=bearer(mint()))
            strict_plain = alice.get("/strict", headers=bearer(mint()))
            strict_bound = alice.get("/strict", headers=bearer(bound_to(pki.alice)))

    assert own.json() == {"sub": "user-1"}
    assert reason(stolen) == "certificate-binding"
    assert plain.status_code == 200  # an unbound token stays a bearer token
    assert reason(strict_plain) == "certificate-binding"  # required=True
    assert strict_bound.status_code == 200


def test_plain_uvicorn_gives_no_certificate_so_a_bound_token_is_refused(pki: PKI):
    # uvicorn checks the client certificate (the handshake needs one) but
    # does not pass it to the app: the binding cannot be checked, so it fails.
    with serve_tls(build(CertificateBinding()), pki) as url, pki.client(pki.alice, url) as alice:
        bound = alice.get("/me", headers=bearer(bound_to(pki.alice)))
        plain = alice.get("/me", headers=bearer(mint()))

    assert reason(bound) == "certificate-binding"
    assert plain.status_code == 200


def test_without_a_binding_a_certificate_bound_token_is_never_a_bearer_token(pki: PKI):
    with serve_tls(build(), pki, TLSExtensionProtocol) as url, pki.client(pki.alice, url) as alice:
        response = alice.get("/me", headers=bearer(bound_to(pki.alice)))

    assert reason(response) == "unchecked-binding"


# -- behind a proxy (a trusted header) --------------------------------------------------------


def test_a_trusted_proxy_header_carries_the_certificate(pki: PKI):
    alice_pem = quote(pki.alice.pem.decode())
    mallory_pem = quote(pki.mallory.pem.decode())
    token = bound_to(pki.alice)
    with serve(
        build(CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=LOOPBACK))
    ) as client:
        own = client.get("/me", headers=bearer(token, **{"X-Client-Cert": alice_pem}))
        plain_pem = client.get(
            "/me",
            headers=[
                ("Authorization", f"Bearer {token}"),
                ("X-Client-Cert", pki.alice.pem.decode().strip().replace("\n", " ")),
            ],
        )
        other = client.get("/me", headers=bearer(token, **{"X-Client-Cert": mallory_pem}))
        missing = client.get("/me", headers=bearer(token))
        twice = client.get(
            "/me",
            headers=[
                ("Authorization", f"Bearer {token}"),
                ("X-Client-Cert", alice_pem),
                ("X-Client-Cert", alice_pem),
            ],
        )
        garbage = client.get("/me", headers=bearer(token, **{"X-Client-Cert": "not a cert"}))

    assert own.json() == {"sub": "user-1"}
    assert plain_pem.status_code == 200
    for refused in (other, missing, twice, garbage):
        assert reason(refused) == "certificate-binding"


def test_an_untrusted_header_is_never_read(pki: PKI):
    token = bound_to(pki.alice)
    with serve(build(CertificateBinding())) as client:
        response = client.get(
            "/me", headers=bearer(token, **{"X-Client-Cert": quote(pki.alice.pem.decode())})
        )

    assert reason(response) == "certificate-binding"


def test_an_envoy_xfcc_header(pki: PKI):
    element = f'Hash=abc;Cert="{quote(pki.alice.pem.decode())}";Subject="CN=alice"'
    token = bound_to(pki.alice)
    binding = CertificateBinding(
        trusted_header="X-Forwarded-Client-Cert", trusted_proxies=LOOPBACK, header_format="xfcc"
    )
    with serve(build(binding)) as client:
        own = client.get("/me", headers=bearer(token, **{"X-Forwarded-Client-Cert": element}))
        no_cert = client.get(
            "/me", headers=bearer(token, **{"X-Forwarded-Client-Cert": "Hash=abc"})
        )
        unbound = client.get(
            "/me", headers=bearer(mint(), **{"X-Forwarded-Client-Cert": "Hash=abc"})
        )

    assert own.status_code == 200
    assert reason(no_cert) == "certificate-binding"
    assert unbound.status_code == 200  # no certificate named: an unbound token stays served


def test_the_thumbprint_is_rfc_8705s(pki: PKI):
    # RFC 8705 §3.1: base64url (no padding) of the SHA-256 of the DER certificate.
    fingerprint = pki.alice.cert.fingerprint(hashes.SHA256())
    import base64  # noqa: PLC0415

    expected = base64.urlsafe_b64encode(fingerprint).rstrip(b"=").decode()
    assert certificate_thumbprint(pki.alice.der) == expected


@pytest.mark.parametrize(
    "options",
    [
        {"trusted_header": "", "trusted_proxies": LOOPBACK},
        {"trusted_header": 5, "trusted_proxies": LOOPBACK},
        {"header_format": "der"},
        {"required": "yes"},
        {"trusted_header": "X-Client-Cert"},  # no trusted_proxies: any peer could set it
        {"trusted_proxies": LOOPBACK},  # proxies with no header to trust
        {"trusted_header": "X-Client-Cert", "trusted_proxies": []},
        {"trusted_header": "X-Client-Cert", "trusted_proxies": ["proxy.internal"]},
        {"trusted_header": "X-Client-Cert", "trusted_proxies": [5]},
        {"trusted_header": "X-Client-Cert", "trusted_proxies": 5},
    ],
)
def test_certificate_binding_options_are_checked(options: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        CertificateBinding(**options)


def test_one_binding_per_method():
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")])
    with pytest.raises(ConfigurationError, match="one binding per"):
        JWTBearer(verifier, bindings=[CertificateBinding(), CertificateBinding()])
    with pytest.raises(ConfigurationError, match="Binding"):
        JWTBearer(verifier, bindings=["x"])  # type: ignore[list-item]


def test_dpop_and_certificate_bindings_together_check_both_methods(pki: PKI):
    from dpop_proofs import ProofSigner, access_token  # noqa: PLC0415

    from grelmicro.jwt import DPoPVerifier  # noqa: PLC0415
    from grelmicro.jwt.fastapi_dpop import DPoPBearer  # noqa: PLC0415

    signer = ProofSigner("ES256")
    both = access_token(
        None, cnf={"jkt": signer.jkt, "x5t#S256": certificate_thumbprint(pki.alice.der)}
    )
    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW)
    auth = DPoPBearer(
        verifier,
        DPoPVerifier(clock=lambda: NOW),
        trust_host_header=True,
        bindings=[CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=LOOPBACK)],
    )
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {"sub": claims.subject}

    with serve(app) as client:
        uri = str(client.base_url).rstrip("/") + "/items"

        def send(**extra: str) -> httpx.Response:
            proof = signer.proof("GET", uri, both)
            return client.get(
                "/items", headers={"Authorization": f"DPoP {both}", "DPoP": proof, **extra}
            )

        ok = send(**{"X-Client-Cert": quote(pki.alice.pem.decode())})
        no_certificate = send()
        other_certificate = send(**{"X-Client-Cert": quote(pki.mallory.pem.decode())})

    assert ok.json() == {"sub": "user-1"}
    for refused in (no_certificate, other_certificate):
        assert refused.status_code == 401
        assert refused.json()["reason"] == "certificate-binding"
        assert refused.headers["www-authenticate"].startswith('DPoP error="invalid_token"')


# -- issue 33 (N17, N18): the header only from named proxies, the nearest proxy's element ---


def test_a_tls_certificate_that_disagrees_with_the_header_is_refused(pki: PKI):
    """The connection's own client certificate and the header must name one certificate."""
    binding = CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=LOOPBACK)
    alice_pem, mallory_pem = quote(pki.alice.pem.decode()), quote(pki.mallory.pem.decode())
    with serve_tls(build(binding), pki, TLSExtensionProtocol) as url:
        with pki.client(pki.alice, url) as alice:
            agreeing = alice.get(
                "/me", headers=bearer(bound_to(pki.alice), **{"X-Client-Cert": alice_pem})
            )
            # Alice's connection, a header naming Mallory and a token bound to Mallory.
            disagreeing = alice.get(
                "/me", headers=bearer(bound_to(pki.mallory), **{"X-Client-Cert": mallory_pem})
            )
            unbound = alice.get("/me", headers=bearer(mint(), **{"X-Client-Cert": mallory_pem}))
            tls_only = alice.get("/me", headers=bearer(bound_to(pki.alice)))

    assert agreeing.json() == {"sub": "user-1"}
    assert reason(disagreeing) == "certificate-binding"
    assert reason(unbound) == "certificate-binding"  # a request that contradicts itself
    assert tls_only.status_code == 200  # no header: the connection's certificate


def test_the_header_is_read_from_the_named_proxies_only(pki: PKI):
    app = build(CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=["10.0.0.0/8"]))
    alice_pem = quote(pki.alice.pem.decode())
    with serve(app) as client:  # the client is 127.0.0.1, not a proxy
        response = client.get(
            "/me", headers=bearer(bound_to(pki.alice), **{"X-Client-Cert": alice_pem})
        )
    assert reason(response) == "certificate-binding"


def test_a_header_with_several_certificates_is_refused(pki: PKI):
    binding = CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=LOOPBACK)
    token = bound_to(pki.alice)
    merged = quote(pki.mallory.pem.decode() + pki.alice.pem.decode())
    reversed_ = quote(pki.alice.pem.decode() + pki.mallory.pem.decode())
    with serve(build(binding)) as client:
        first_mallory = client.get("/me", headers=bearer(token, **{"X-Client-Cert": merged}))
        first_alice = client.get("/me", headers=bearer(token, **{"X-Client-Cert": reversed_}))
    assert reason(first_mallory) == "certificate-binding"
    assert reason(first_alice) == "certificate-binding"


def xfcc_app() -> FastAPI:
    return build(
        CertificateBinding(
            trusted_header="X-Forwarded-Client-Cert", trusted_proxies=LOOPBACK, header_format="xfcc"
        )
    )


def test_xfcc_uses_the_element_the_nearest_proxy_appended(pki: PKI):
    """Under APPEND_FORWARD the client's own element comes first: it is never used."""
    alice, mallory = quote(pki.alice.pem.decode()), quote(pki.mallory.pem.decode())
    forged_first = f'Cert="{alice}";Subject="CN=alice",Hash=00;Cert="{mallory}"'
    honest = f'By=spiffe://edge;Cert="{mallory}",Hash=00;Cert="{alice}";Subject="CN=alice"'
    token = bound_to(pki.alice)
    with serve(xfcc_app()) as client:
        forged = client.get(
            "/me", headers=bearer(token, **{"X-Forwarded-Client-Cert": forged_first})
        )
        own = client.get("/me", headers=bearer(token, **{"X-Forwarded-Client-Cert": honest}))
    assert reason(forged) == "certificate-binding"
    assert own.status_code == 200


def test_xfcc_quoted_values_cannot_inject_a_cert(pki: PKI):
    """A Subject holding ``;Cert=...`` or ``,Cert=...`` is one quoted value, not a pair."""
    alice, mallory = quote(pki.alice.pem.decode()), quote(pki.mallory.pem.decode())
    token = bound_to(pki.alice)
    headers = {
        "semicolon": f'Cert="{mallory}";Subject="CN=x;Cert={alice}"',
        "comma": f'Cert="{mallory}";Subject="CN=x,Cert={alice}"',
        "escaped quote": f'Cert="{mallory}";Subject="CN=x\\";Cert={alice};x=\\""',
    }
    with serve(xfcc_app()) as client:
        answers = {
            what: client.get("/me", headers=bearer(token, **{"X-Forwarded-Client-Cert": value}))
            for what, value in headers.items()
        }
    for what, response in answers.items():
        assert reason(response) == "certificate-binding", what


@pytest.mark.parametrize(
    ("value", "elements"),
    [
        ("Hash=a;Cert=b", [[("hash", "a"), ("cert", "b")]]),
        ('By=x;Subject="C=US, CN=a;b"', [[("by", "x"), ("subject", "C=US, CN=a;b")]]),
        ('Subject="a\\"b\\\\c"', [[("subject", 'a"b\\c')]]),
        ("a=1, b=2;c=3", [[("a", "1")], [("b", "2"), ("c", "3")]]),
        ('Cert=""', [[("cert", "")]]),
        ("", []),
    ],
)
def test_xfcc_grammar(value: str, elements: list[list[tuple[str, str]]]):
    from grelmicro.jwt.fastapi._bindings import _xfcc_elements  # noqa: PLC0415

    assert _xfcc_elements(value) == elements


@pytest.mark.parametrize(
    "value", ['Cert="open', 'Cert="a"b', "Cert", 'Ce"rt=a', 'Cert=a"b', 'Cert="a\\']
)
def test_malformed_xfcc_is_refused(value: str):
    from grelmicro.jwt.fastapi._bindings import (  # noqa: PLC0415
        _UnusableHeaderError,
        _xfcc_elements,
    )

    with pytest.raises(_UnusableHeaderError):
        _xfcc_elements(value)


def test_behind_a_real_nginx_the_header_is_the_proxys(pki: PKI, tmp_path: Path):
    """nginx terminates TLS and sets X-Client-Cert; the app trusts its address only.

    nginx forwards from 127.0.0.2; the test clients connect from 127.0.0.1.
    A client's own X-Client-Cert never reaches the app through nginx (the
    proxy replaces it), and sent to the app directly it is not read.
    """
    from daemons import Nginx  # noqa: PLC0415
    from servers import Running  # noqa: PLC0415

    binding = CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=["127.0.0.2"])
    running = Running(build(binding))
    running.server.config.proxy_headers = False  # scope["client"] is the TCP peer
    assert running.start()
    alice_pem = quote(pki.alice.pem.decode())
    token = bound_to(pki.alice)
    proxy = Nginx(
        tmp_path,
        upstream=running.port,
        certificate=pki.folder / "server.pem",
        key=pki.folder / "server.key",
        ca=pki.folder / "ca.pem",
        headers={"X-Client-Cert": "$ssl_client_escaped_cert"},
    )
    anonymous_tls = ssl.create_default_context(cafile=str(pki.folder / "ca.pem"))
    try:
        with proxy.running():
            with pki.client(pki.alice, proxy.url) as alice:
                own = alice.get("/me", headers=bearer(token))
            with pki.client(pki.mallory, proxy.url) as mallory:
                stolen = mallory.get("/me", headers=bearer(token, **{"X-Client-Cert": alice_pem}))
            with httpx.Client(base_url=proxy.url, verify=anonymous_tls, timeout=10) as nobody:
                no_certificate = nobody.get(
                    "/me", headers=bearer(token, **{"X-Client-Cert": alice_pem})
                )
        with httpx.Client(base_url=running.url, timeout=10) as direct:
            bypass = direct.get("/me", headers=bearer(token, **{"X-Client-Cert": alice_pem}))
            spoofed_peer = direct.get(
                "/me",
                headers=bearer(
                    token, **{"X-Client-Cert": alice_pem, "X-Forwarded-For": "127.0.0.2"}
                ),
            )
    finally:
        running.stop()

    assert own.json() == {"sub": "user-1"}
    assert reason(stolen) == "certificate-binding"
    assert reason(no_certificate) == "certificate-binding"
    assert reason(bypass) == "certificate-binding"
    assert reason(spoofed_peer) == "certificate-binding"


# -- proxy trust that configuration next door cannot bypass (issue 38, N29) --------------


@pytest.mark.parametrize("everyone", ["0.0.0.0/0", "::/0", "0.0.0.0/0.0.0.0"])
def test_a_trusted_network_of_every_address_is_refused(everyone: str):
    with pytest.raises(ConfigurationError, match="every address"):
        CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=["10.0.0.5", everyone])
    forced = CertificateBinding(
        trusted_header="X-Client-Cert", trusted_proxies=[everyone], unsafe_trust_any_peer=True
    )
    assert forced.trusted_proxies


@pytest.mark.parametrize(
    ("argv", "environ", "trusts_any"),
    [
        (["/venv/bin/uvicorn", "app:app", "--forwarded-allow-ips", "*"], {}, True),
        (["/venv/bin/uvicorn", "app:app", "--proxy-headers", "--forwarded-allow-ips=*"], {}, True),
        (["/venv/lib/uvicorn/__main__.py", "app:app"], {"FORWARDED_ALLOW_IPS": "*"}, True),
        (["/venv/bin/uvicorn", "app:app", "--forwarded-allow-ips", "10.0.0.5,*"], {}, True),
        (["/venv/bin/uvicorn", "app:app", "--forwarded-allow-ips", "10.0.0.5"], {}, False),
        (["/venv/bin/uvicorn", "--no-proxy-headers", "--forwarded-allow-ips", "*"], {}, False),
        (["/venv/bin/uvicorn", "app:app"], {}, False),
        (["/venv/bin/gunicorn", "app:app"], {"FORWARDED_ALLOW_IPS": "*"}, False),
    ],
)
def test_uvicorn_trusting_any_forwarder_is_seen(
    argv: list[str], environ: dict[str, str], trusts_any: bool
):
    from grelmicro.jwt.fastapi._bindings import _uvicorn_trusts_any_forwarder  # noqa: PLC0415

    assert _uvicorn_trusts_any_forwarder(argv, environ) is trusts_any


def test_uvicorn_with_proxy_headers_from_anyone_refuses_to_start():
    """``--proxy-headers --forwarded-allow-ips='*'``: any client could pose as the proxy."""
    tests = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)]),
        "FORWARDED_ALLOW_IPS": "",
    }
    command = [
        sys.executable, "-m", "uvicorn", "mtls_proxy_app:app", "--host", "127.0.0.1",
        "--port", str(free_port()), "--proxy-headers", "--forwarded-allow-ips", "*",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "--forwarded-allow-ips='*'" in done.stderr
    assert "--no-proxy-headers" in done.stderr
