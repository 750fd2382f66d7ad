"""Bindings: the checks that make a sender-constrained token usable by its holder only.

A token's ``cnf`` claim (read by :func:`grelmicro.jwt._confirmation.confirmation`)
names what its holder must also prove. A :class:`Binding` plugged into
``JWTBearer(verifier, bindings=[...])`` checks one confirmation method; a
token bound by a method no binding checks is refused (``unchecked-binding``,
or ``dpop-binding`` for ``cnf.jkt``): never accepted as a plain bearer token.

- :class:`CertificateBinding` (this module): RFC 8705 certificate-bound
  tokens, ``cnf.x5t#S256`` against the client certificate.
- :class:`~grelmicro.jwt.fastapi.DPoPBinding`: RFC 9449 DPoP, ``cnf.jkt``
  against the proof's key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import unquote

from starlette.requests import HTTPConnection
from starlette.types import Scope

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._confirmation import X5T_S256, Confirmation
from grelmicro.jwt.errors import CertificateBindingError, ConfigurationError
from grelmicro.jwt.fastapi._challenges import Challenges
from grelmicro.jwt.fastapi._presentation import Presentation

__all__ = ["Binding", "BoundRequest", "CertificateBinding", "certificate_thumbprint"]


@dataclass(frozen=True, slots=True)
class BoundRequest:
    """What a :class:`Binding` checks: a request whose token verified, and its ``cnf``.

    ``connection`` is the request, ``presentation`` what its client presented
    (scheme, token, proof, certificate), ``claims`` the verified token,
    ``bound`` its confirmation, and ``challenges`` the answers a binding
    raises to refuse it.
    """

    connection: HTTPConnection
    presentation: Presentation
    claims: Claims
    bound: Confirmation
    challenges: Challenges


class Binding:
    """One confirmation method checked on every request (a base to build on).

    ``method`` is the ``cnf`` member it checks; ``schemes`` the
    ``Authorization`` schemes it reads besides ``Bearer`` (lower-case bytes
    to the scheme's name). The dependency calls :meth:`configure` once,
    :meth:`read` after the credentials are read and before the token is
    verified, and :meth:`check` once the token verified.
    """

    method: ClassVar[str] = ""
    schemes: ClassVar[Mapping[bytes, str]] = {}

    def configure(self, challenges: Challenges) -> None:
        """Add this binding's schemes and challenges (called once, at build time)."""

    def read(
        self,
        scope: Scope,  # noqa: ARG002 - for the bindings that read the request
        presentation: Presentation,
        challenges: Challenges,  # noqa: ARG002 - for the bindings that refuse while reading
    ) -> Presentation:
        """``presentation`` with what this binding needs from the request added."""
        return presentation

    def check(self, request: BoundRequest) -> None:
        """Refuse (raise a :class:`~grelmicro.jwt.fastapi.BearerError`) what does not fit."""
        raise NotImplementedError

    async def check_async(self, request: BoundRequest) -> None:
        """:meth:`check`, as the dependency calls it (a binding doing I/O awaits it here)."""
        self.check(request)


def certificate_thumbprint(der: bytes) -> str:
    """The RFC 8705 ``x5t#S256`` of a DER certificate: base64url SHA-256, no padding."""
    digest = hashlib.sha256(der).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


_PEM_BEGIN = "-----BEGIN CERTIFICATE-----"
_PEM_END = "-----END CERTIFICATE-----"


class _UnusableHeaderError(Exception):
    """A certificate header from a trusted proxy that cannot be trusted as it is."""


def _pem_to_der(pem: str) -> bytes | None:
    """The DER body of the one PEM certificate in ``pem``, ``None`` if there is none.

    Raises:
        _UnusableHeaderError: ``pem`` holds several certificates (which one is the
            client's would be a guess).
    """
    if pem.count(_PEM_BEGIN) > 1:
        raise _UnusableHeaderError
    start = pem.find(_PEM_BEGIN)
    end = pem.find(_PEM_END, start + 1)
    if start < 0 or end < 0:
        return None
    body = "".join(pem[start + len(_PEM_BEGIN) : end].split())
    try:
        return base64.b64decode(body, validate=True) or None
    except (binascii.Error, ValueError):
        return None


def _split_unquoted(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` where it stands outside double quotes.

    Inside quotes a backslash escapes the next character.

    Raises:
        _UnusableHeaderError: a quote is left open.
    """
    parts: list[str] = []
    start, quoted, escaped = 0, False, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append(text[start:index])
            start = index + 1
    if quoted or escaped:
        raise _UnusableHeaderError
    parts.append(text[start:])
    return parts


def _unquoted(raw: str) -> str:
    """A plain or double-quoted XFCC value, its backslash escapes undone.

    Raises:
        _UnusableHeaderError: a quote that does not enclose the whole value.
    """
    if not raw.startswith('"'):
        if '"' in raw:
            raise _UnusableHeaderError
        return raw
    chars: list[str] = []
    escaped = False
    for index, char in enumerate(raw[1:], 1):
        if escaped:
            chars.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            if index != len(raw) - 1:
                raise _UnusableHeaderError  # text after the closing quote
            return "".join(chars)
        else:
            chars.append(char)
    raise _UnusableHeaderError


def _xfcc_elements(value: str) -> list[list[tuple[str, str]]]:
    """An Envoy ``X-Forwarded-Client-Cert`` value read by its grammar.

    Elements are separated by ``,`` and their ``key=value`` pairs by ``;``,
    only outside double quotes; a quoted value keeps its ``,``, ``;`` and
    ``=``, and a backslash in it escapes the next character. Keys are
    lower-cased; whitespace around elements, pairs and values is skipped.

    Raises:
        _UnusableHeaderError: a quote left open or not enclosing a whole
            value, or a pair without ``=``.
    """
    elements = []
    for element in _split_unquoted(value, ","):
        pairs = []
        for pair in _split_unquoted(element, ";"):
            if not pair.strip():
                continue
            key, equals, raw = pair.partition("=")
            if not equals or '"' in key or not key.strip():
                raise _UnusableHeaderError
            pairs.append((key.strip().lower(), _unquoted(raw.strip())))
        if pairs:
            elements.append(pairs)
    return elements


def _xfcc_certificate(value: str) -> bytes | None:
    """The ``Cert`` of the last element of an ``X-Forwarded-Client-Cert`` value.

    Each proxy appends its element: the last one is the nearest proxy's (the
    trusted one), every earlier one came from further away, perhaps from
    the client. Two ``Cert`` pairs in that element are refused.
    """
    elements = _xfcc_elements(value)
    if not elements:
        return None
    certificates = [text for key, text in elements[-1] if key == "cert"]
    if len(certificates) > 1:
        raise _UnusableHeaderError
    return _pem_to_der(unquote(certificates[0])) if certificates else None


def _network(entry: object) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """An address or a network (``10.0.0.0/24``) read, ``None`` if it is neither."""
    if not isinstance(entry, str):
        return None
    try:
        return ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        return None


def _networks(
    trusted_proxies: Iterable[str],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``trusted_proxies`` read as networks (an address is a network of one)."""
    if isinstance(trusted_proxies, str):
        trusted_proxies = [trusted_proxies]
    try:
        given: list[object] = list(trusted_proxies)
    except TypeError:
        given = [trusted_proxies]  # not iterable: refused as an entry below
    networks = []
    for entry in given:
        network = _network(entry)
        if network is None:
            raise ConfigurationError(
                "trusted_proxies are the addresses or networks of the proxies that set "
                "the header, such as '10.0.0.5' or '10.0.0.0/24' (host names are not "
                "accepted)"
            )
        networks.append(network)
    if not networks:
        raise ConfigurationError("trusted_proxies needs at least one address or network")
    return tuple(networks)


def _trust_all(networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> str | None:
    """The entry that trusts every peer (``0.0.0.0/0``, ``::/0``), if any."""
    for network in networks:
        if network.prefixlen == 0:
            return str(network)
    return None


def _uvicorn_trusts_any_forwarder(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether this process runs under uvicorn rewriting the peer from any client's headers.

    uvicorn's ``--proxy-headers`` (on by default) sets ``scope["client"]``
    from ``X-Forwarded-For`` when the connecting peer is in
    ``--forwarded-allow-ips``; with ``*`` every client chooses the address
    the app sees, a trusted proxy's included. Read from the command line
    (its workers inherit it) and ``FORWARDED_ALLOW_IPS``; ``uvicorn.run()``
    called in code is not visible here.
    """
    # `uvicorn ...` and `python -m uvicorn ...` both leave "uvicorn" in argv[0].
    if not argv or "uvicorn" not in str(argv[0]):
        return False
    if "--no-proxy-headers" in argv:
        return False
    allowed = environ.get("FORWARDED_ALLOW_IPS", "")
    for index, arg in enumerate(argv):
        if arg == "--forwarded-allow-ips" and index + 1 < len(argv):
            allowed = argv[index + 1]
        elif arg.startswith("--forwarded-allow-ips="):
            allowed = arg.split("=", 1)[1]
    return any(item.strip().strip("'\"") == "*" for item in allowed.split(","))


class CertificateBinding(Binding):
    """RFC 8705 certificate-bound tokens: ``cnf.x5t#S256`` against the client certificate.

    The certificate comes from the ASGI server's TLS extension
    (``scope["extensions"]["tls"]["client_cert_chain"]``) or, behind a proxy
    that terminates TLS, from ``trusted_header``. That header is read only on
    a request whose peer is one of ``trusted_proxies``; from any other peer
    it is ignored. The peer is whatever the ASGI server puts in
    ``scope["client"]``: this check is exactly as good as that address. A
    server that rewrites it from a client's own headers (uvicorn's
    ``--proxy-headers`` with ``--forwarded-allow-ips='*'``) lets a client
    reaching the app directly send ``X-Forwarded-For: <proxy address>``
    and be believed: that configuration is refused at start-up when it can
    be seen (the uvicorn command line, ``FORWARDED_ALLOW_IPS``), and so is
    a trusted network of every address (``0.0.0.0/0``, ``::/0``), unless
    ``unsafe_trust_any_peer=True``. Run uvicorn with ``--no-proxy-headers``
    (or ``--forwarded-allow-ips`` naming only the proxy, and then list in
    ``trusted_proxies`` what uvicorn reports: the address before the proxy)
    and let only the proxy reach the app. uvicorn does not pass the client
    certificate to the app (0.54); run it behind such a proxy, or under a
    server that implements the extension.

    A request is refused (``certificate-binding``) when the header from a
    trusted proxy is ambiguous (several PEM certificates, two header lines,
    two ``Cert`` pairs, an ``X-Forwarded-Client-Cert`` that does not parse),
    or when the TLS connection carries a client certificate that is not the
    one the header names. A header that names no certificate counts as none.

    Args:
        trusted_header: the header the proxy puts the client certificate in
            (``X-Client-Cert``, ``X-Forwarded-Client-Cert``); ``None`` reads
            the TLS extension only.
        trusted_proxies: the addresses or networks (``"10.0.0.5"``,
            ``"10.0.0.0/24"``, ``"::1"``) of the proxies that set
            ``trusted_header``; required with it. Compared with the address
            the ASGI server reports (see above), never with a header.
        header_format: ``"pem"`` (URL-encoded or plain PEM, one certificate,
            as nginx's ``$ssl_client_escaped_cert`` and most load balancers
            send it) or ``"xfcc"`` (Envoy's ``X-Forwarded-Client-Cert``: the
            ``Cert`` of the last element, the one the nearest proxy appended).
        required: refuse tokens that are not certificate-bound.
        unsafe_trust_any_peer: accept a trusted network of every address, and
            uvicorn trusting any forwarder: only where something else (a
            network policy, a sidecar) guarantees that nothing but the proxy
            reaches the app.

    Raises:
        ConfigurationError: at build, for the configurations above.
    """

    method = X5T_S256

    def __init__(
        self,
        *,
        trusted_header: str | None = None,
        trusted_proxies: Iterable[str] | None = None,
        header_format: str = "pem",
        required: bool = False,
        unsafe_trust_any_peer: bool = False,
    ) -> None:
        if trusted_header is not None and (
            not isinstance(trusted_header, str) or not trusted_header.strip()
        ):
            raise ConfigurationError("trusted_header must be a header name such as 'X-Client-Cert'")
        if trusted_header is not None and trusted_proxies is None:
            raise ConfigurationError(
                "trusted_header is believed only from the proxies that set it: pass "
                "trusted_proxies=['10.0.0.5'] (their addresses or networks); without it any "
                "client reaching the app directly could name a certificate it does not hold"
            )
        if trusted_header is None and trusted_proxies is not None:
            raise ConfigurationError(
                "trusted_proxies names the proxies that set trusted_header; pass trusted_header too"
            )
        if header_format not in ("pem", "xfcc"):
            raise ConfigurationError("header_format must be 'pem' or 'xfcc'")
        if not isinstance(required, bool):
            raise ConfigurationError("required must be True or False")
        self.trusted_header = (
            None if trusted_header is None else trusted_header.strip().lower().encode("latin-1")
        )
        self.trusted_proxies = () if trusted_proxies is None else _networks(trusted_proxies)
        if not isinstance(unsafe_trust_any_peer, bool):
            raise ConfigurationError("unsafe_trust_any_peer must be True or False")
        if not unsafe_trust_any_peer and self.trusted_header is not None:
            everyone = _trust_all(self.trusted_proxies)
            if everyone is not None:
                raise ConfigurationError(
                    f"trusted_proxies holds {everyone}, every address: any client could "
                    "name a certificate in the header; list the proxies' own addresses "
                    "(or pass unsafe_trust_any_peer=True if only the proxy can reach the app)"
                )
            if _uvicorn_trusts_any_forwarder(sys.argv, os.environ):
                raise ConfigurationError(
                    "uvicorn runs with --proxy-headers and --forwarded-allow-ips='*': it "
                    "takes the peer address from any client's X-Forwarded-For, so a client "
                    "reaching the app directly could pose as a trusted proxy and name a "
                    "certificate in the header; run uvicorn with --no-proxy-headers (or "
                    "--forwarded-allow-ips naming only the proxy), or pass "
                    "unsafe_trust_any_peer=True if only the proxy can reach the app"
                )
        self.header_format = header_format
        self.required = required

    def __repr__(self) -> str:
        source = "tls" if self.trusted_header is None else self.trusted_header.decode()
        return f"CertificateBinding(source={source!r}, required={self.required})"

    def read(
        self,
        scope: Scope,
        presentation: Presentation,
        challenges: Challenges,
    ) -> Presentation:
        """The client certificate, from the TLS extension or the trusted proxy's header."""
        try:
            certificate = self._certificate(scope)
        except _UnusableHeaderError:
            raise challenges.invalid_token(
                CertificateBindingError.reason, presentation.scheme
            ) from None
        if certificate is None:
            return presentation
        return presentation._replace(certificate=certificate)

    def _from_proxy(self, scope: Scope) -> bool:
        """Whether the request's peer is one of the trusted proxies."""
        client = scope.get("client")
        if not client:
            return False
        try:
            address = ipaddress.ip_address(str(client[0]))
        except ValueError:
            return False  # a Unix socket path, a name: not a named proxy
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.trusted_proxies)

    def _certificate(self, scope: Scope) -> bytes | None:
        """The client certificate (DER) the server or a trusted proxy provides.

        Raises:
            _UnusableHeaderError: the trusted proxy's header cannot be read as one
                certificate, or disagrees with the TLS connection's.
        """
        tls = (scope.get("extensions") or {}).get("tls") or {}
        chain = tls.get("client_cert_chain") or ()
        first = next(iter(chain), None)
        connection = _pem_to_der(first) if isinstance(first, str) else None
        if self.trusted_header is None or not self._from_proxy(scope):
            return connection
        values = [raw for name, raw in scope["headers"] if name == self.trusted_header]
        if not values:
            return connection
        if len(values) != 1:
            raise _UnusableHeaderError  # two: trust neither
        text = values[0].decode("latin-1")
        header = (
            _xfcc_certificate(text) if self.header_format == "xfcc" else _pem_to_der(unquote(text))
        )
        if header is None:
            # No certificate in it (no Cert pair, not PEM): none was shown,
            # unless the connection shows one (a bound token is refused then).
            return connection
        if connection is not None and not hmac.compare_digest(connection, header):
            raise _UnusableHeaderError
        return header

    def check(self, request: BoundRequest) -> None:
        """``cnf.x5t#S256`` is the thumbprint of the client certificate, or the token is refused."""
        presentation, challenges = request.presentation, request.challenges
        expected = request.bound.x5t_s256
        if expected is None:
            if self.required:
                raise challenges.invalid_token(CertificateBindingError.reason, presentation.scheme)
            return
        certificate = presentation.certificate
        if certificate is None or not hmac.compare_digest(
            certificate_thumbprint(certificate), expected
        ):
            raise challenges.invalid_token(CertificateBindingError.reason, presentation.scheme)
