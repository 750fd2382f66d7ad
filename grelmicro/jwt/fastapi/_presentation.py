"""Reading the credentials of a request into a :class:`Presentation`.

One reader for every dependency: the ``Authorization`` header (one of them,
its scheme compared without case, spaces or tabs around and after the scheme
tolerated as RFC 9110 allows), the websocket subprotocol ``bearer, <token>``,
and the refusals every path shares: a token in the query string (also when
its name is percent-encoded) or two tokens are a 400, whatever the scheme.
What a binding needs beyond the token (the DPoP proof, the client
certificate) is read by that binding into the same object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.types import Scope

from grelmicro.jwt.fastapi._challenges import BEARER, Challenges

__all__ = ["SUBPROTOCOL", "Presentation", "read_credentials"]

#: The websocket subprotocol that announces a token: a client that cannot set
#: headers offers ``Sec-WebSocket-Protocol: bearer, <token>``.
SUBPROTOCOL = "bearer"

#: RFC 9110 optional whitespace.
_OWS = b" \t"


@dataclass(frozen=True, slots=True)
class Presentation:
    """How the request presented its token.

    ``scheme`` is ``"Bearer"`` or another scheme a binding reads (``"DPoP"``);
    ``proof`` is the DPoP proof header and ``certificate`` the client
    certificate (DER), when a binding read them.
    """

    scheme: str
    token: bytes
    proof: bytes | None = None
    certificate: bytes | None = None


def _authorization(scope: Scope, errors: Challenges) -> bytes | None:
    """The request's one ``Authorization`` header, ``None`` if it has none."""
    value: bytes | None = None
    for name, raw in scope["headers"]:
        if name == b"authorization":
            if value is not None:
                raise errors.invalid_request("multiple-tokens")
            value = raw
    return value


def _split(value: bytes) -> tuple[bytes, bytes]:
    """``(scheme, credentials)`` of an ``Authorization`` value, whitespace trimmed."""
    value = value.strip(_OWS)
    for index, byte in enumerate(value):
        if byte in _OWS:
            return value[:index], value[index:].lstrip(_OWS)
    return value, b""


def _has_query_token(query: bytes) -> bool:
    if b"access_token" not in query and b"%" not in query:
        return False  # the usual request: no parsing
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return any(name == "access_token" for name, _ in pairs)


def _subprotocol_token(scope: Scope) -> bytes | None:
    """The token offered as ``Sec-WebSocket-Protocol: bearer, <token>``."""
    offered = scope.get("subprotocols") or ()
    for index, name in enumerate(offered[:-1]):
        if name == SUBPROTOCOL:
            return str(offered[index + 1]).encode("latin-1", "replace")
    return None


def read_credentials(
    scope: Scope, schemes: Mapping[bytes, str], errors: Challenges
) -> Presentation | None:
    """The request's token and scheme, ``None`` when it carries none of ``schemes``.

    ``schemes`` maps a lower-case scheme to its name (``b"bearer": "Bearer"``).
    Another scheme (``Basic``) reads as no credentials.

    Raises:
        BearerError: 400 ``invalid_request``: two ``Authorization`` headers,
            a token in the query string, a token in two places, or a known
            scheme with empty credentials.
    """
    header = _authorization(scope, errors)
    scheme: str | None = None
    token = b""
    if header is not None:
        raw_scheme, token = _split(header)
        scheme = schemes.get(raw_scheme.lower())
    query = scope.get("query_string")
    if query and _has_query_token(query):
        said = scheme or BEARER
        raise errors.invalid_request("multiple-tokens" if header else "query-token", said)
    if scope["type"] == "websocket":
        offered = _subprotocol_token(scope)
        if offered is not None:
            if header is not None:
                raise errors.invalid_request("multiple-tokens", scheme or BEARER)
            return Presentation(BEARER, offered)
    if scheme is None:
        return None  # no header, or another scheme: not ours, answered like no credentials
    if not token:
        raise errors.invalid_request("empty-token", scheme)
    return Presentation(scheme, token)
