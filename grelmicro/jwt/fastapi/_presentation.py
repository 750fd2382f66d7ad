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
from typing import NamedTuple
from urllib.parse import parse_qsl

from starlette.types import Scope

from grelmicro.jwt.challenges import BEARER, Challenges
from grelmicro.jwt.guard import split_authorization

__all__ = ["SUBPROTOCOL", "Presentation", "read_credentials"]

#: The websocket subprotocol that announces a token: a client that cannot set
#: headers offers ``Sec-WebSocket-Protocol: bearer, <token>``.
SUBPROTOCOL = "bearer"


class Presentation(NamedTuple):
    """How the request presented its token (immutable; a binding adds with ``_replace``).

    ``scheme`` is ``"Bearer"`` or another scheme a binding reads (``"DPoP"``);
    ``proof`` is the DPoP proof header and ``certificate`` the client
    certificate (DER), when a binding read them.
    """

    scheme: str
    token: bytes
    proof: bytes | None = None
    certificate: bytes | None = None


def _has_query_token(query: bytes) -> bool:
    """Whether the query string names ``access_token``, percent-encoded or not."""
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
    header: bytes | None = None
    for name, raw in scope["headers"]:
        if name == b"authorization":
            if header is not None:
                raise errors.invalid_request("multiple-tokens", _scheme_of(header, schemes))
            header = raw
    query = scope.get("query_string")
    # Parsed only when it may name the token: the name as is, or escaped.
    if query and (b"access_token" in query or b"%" in query) and _has_query_token(query):
        said = _scheme_of(header, schemes)
        raise errors.invalid_request("query-token" if header is None else "multiple-tokens", said)
    if scope["type"] == "websocket":
        offered = _subprotocol_token(scope)
        if offered is not None:
            if header is not None:
                raise errors.invalid_request("multiple-tokens", _scheme_of(header, schemes))
            return _presentation(BEARER, offered)
    if header is None:
        return None
    raw_scheme, token = split_authorization(header)
    scheme = schemes.get(raw_scheme.lower())
    if scheme is None:
        return None  # another scheme: not ours, answered like no credentials
    if not token:
        raise errors.invalid_request("empty-token", scheme)
    return _presentation(scheme, token)


def _presentation(scheme: str, token: bytes) -> Presentation:
    """A :class:`Presentation` built at tuple speed (a NamedTuple's own ``__new__`` is slow)."""
    return tuple.__new__(Presentation, (scheme, token, None, None))


def _scheme_of(header: bytes | None, schemes: Mapping[bytes, str]) -> str:
    """The scheme to challenge with: the one the client used if known, else Bearer."""
    if header is None:
        return BEARER
    return schemes.get(split_authorization(header)[0].lower(), BEARER)
