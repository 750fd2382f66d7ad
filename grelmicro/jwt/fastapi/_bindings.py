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
from collections.abc import Mapping
from typing import ClassVar
from urllib.parse import unquote

from starlette.requests import HTTPConnection
from starlette.types import Scope

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._confirmation import X5T_S256, Confirmation
from grelmicro.jwt.errors import CertificateBindingError, ConfigurationError
from grelmicro.jwt.fastapi._challenges import Challenges
from grelmicro.jwt.fastapi._presentation import Presentation

__all__ = ["Binding", "CertificateBinding", "certificate_thumbprint"]


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

    def check(
        self,
        connection: HTTPConnection,
        presentation: Presentation,
        claims: Claims,
        bound: Confirmation,
        challenges: Challenges,
    ) -> None:
        """Refuse (raise a :class:`~grelmicro.jwt.fastapi.BearerError`) what does not fit."""
        raise NotImplementedError


def certificate_thumbprint(der: bytes) -> str:
    """The RFC 8705 ``x5t#S256`` of a DER certificate: base64url SHA-256, no padding."""
    digest = hashlib.sha256(der).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


_PEM_BEGIN = "-----BEGIN CERTIFICATE-----"
_PEM_END = "-----END CERTIFICATE-----"


def _pem_to_der(pem: str) -> bytes | None:
    """The DER body of the first PEM certificate in ``pem``, ``None`` if there is none."""
    start = pem.find(_PEM_BEGIN)
    end = pem.find(_PEM_END, start + 1)
    if start < 0 or end < 0:
        return None
    body = "".join(pem[start + len(_PEM_BEGIN) : end].split())
    try:
        return base64.b64decode(body, validate=True) or None
    except (binascii.Error, ValueError):
        return None


def _xfcc_certificate(value: str) -> bytes | None:
    """The ``Cert`` of the first element of an Envoy ``X-Forwarded-Client-Cert`` header."""
    first = value.split(",", 1)[0]
    for part in first.split(";"):
        key, _, raw = part.strip().partition("=")
        if key.lower() == "cert":
            return _pem_to_der(unquote(raw.strip('"')))
    return None


class CertificateBinding(Binding):
    """RFC 8705 certificate-bound tokens: ``cnf.x5t#S256`` against the client certificate.

    The certificate comes from the ASGI server's TLS extension
    (``scope["extensions"]["tls"]["client_cert_chain"]``) or, behind a proxy
    that terminates TLS, from ``trusted_header`` (named explicitly: only a
    proxy that sets it and strips any copy sent by clients may be trusted).
    uvicorn does not pass the client certificate to the app (0.54); run it
    behind such a proxy, or under a server that implements the extension.

    Args:
        trusted_header: the header the proxy puts the client certificate in
            (``X-Client-Cert``, ``X-Forwarded-Client-Cert``); ``None`` reads
            the TLS extension only.
        header_format: ``"pem"`` (URL-encoded or plain PEM, as nginx's
            ``$ssl_client_escaped_cert`` and most load balancers send it) or
            ``"xfcc"`` (Envoy's ``Cert="..."`` element).
        required: refuse tokens that are not certificate-bound.
    """

    method = X5T_S256

    def __init__(
        self,
        *,
        trusted_header: str | None = None,
        header_format: str = "pem",
        required: bool = False,
    ) -> None:
        if trusted_header is not None and (
            not isinstance(trusted_header, str) or not trusted_header.strip()
        ):
            raise ConfigurationError("trusted_header must be a header name such as 'X-Client-Cert'")
        if header_format not in ("pem", "xfcc"):
            raise ConfigurationError("header_format must be 'pem' or 'xfcc'")
        if not isinstance(required, bool):
            raise ConfigurationError("required must be True or False")
        self.trusted_header = (
            None if trusted_header is None else trusted_header.strip().lower().encode("latin-1")
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
        challenges: Challenges,  # noqa: ARG002 - a missing certificate is refused in check()
    ) -> Presentation:
        """The client certificate, from the TLS extension or the trusted header."""
        certificate = self._certificate(scope)
        if certificate is None:
            return presentation
        return presentation._replace(certificate=certificate)

    def _certificate(self, scope: Scope) -> bytes | None:
        """The client certificate (DER) the server or the trusted proxy provides."""
        if self.trusted_header is None:
            tls = (scope.get("extensions") or {}).get("tls") or {}
            chain = tls.get("client_cert_chain") or ()
            first = next(iter(chain), None)
            return _pem_to_der(first) if isinstance(first, str) else None
        values = [raw for name, raw in scope["headers"] if name == self.trusted_header]
        if len(values) != 1:
            return None  # none, or two: trust neither
        text = values[0].decode("latin-1")
        if self.header_format == "xfcc":
            return _xfcc_certificate(text)
        return _pem_to_der(unquote(text))

    def check(
        self,
        connection: HTTPConnection,  # noqa: ARG002
        presentation: Presentation,
        claims: Claims,  # noqa: ARG002
        bound: Confirmation,
        challenges: Challenges,
    ) -> None:
        """``cnf.x5t#S256`` is the thumbprint of the client certificate, or the token is refused."""
        expected = bound.x5t_s256
        if expected is None:
            if self.required:
                raise challenges.invalid_token(CertificateBindingError.reason, presentation.scheme)
            return
        certificate = presentation.certificate
        if certificate is None or not hmac.compare_digest(
            certificate_thumbprint(certificate), expected
        ):
            raise challenges.invalid_token(CertificateBindingError.reason, presentation.scheme)
