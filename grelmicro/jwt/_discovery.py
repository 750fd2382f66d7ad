"""OIDC discovery (and RFC 8414): from an issuer to its JWKS URL.

The issuer names where its metadata lives; the metadata names the JWKS.
Both are checked: the document's ``issuer`` must equal the configured one
exactly (OpenID Connect Discovery §4.3, RFC 8414 §3.3), and its ``jwks_uri``
obeys the same https rule as a JWKS URL given in code.
"""

from __future__ import annotations

import json

import httpx

from grelmicro.jwt import _core
from grelmicro.jwt._http import ConfigFaultError, FetchError, check_url
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["discovery_urls", "jwks_uri_of"]

OIDC = "/.well-known/openid-configuration"
OAUTH = "/.well-known/oauth-authorization-server"


def discovery_urls(issuer: str) -> tuple[str, str]:
    """Where the metadata of ``issuer`` may live, in the order to try.

    OpenID Connect appends the well-known path to the issuer; RFC 8414 puts
    it between the host and the issuer's path.
    """
    oidc = issuer.rstrip("/") + OIDC
    url = httpx.URL(issuer)
    path = url.path.rstrip("/")
    oauth = str(url.copy_with(path=OAUTH + path, query=None, fragment=None))
    return oidc, oauth


def jwks_uri_of(body: bytes, issuer: str, allow_insecure_loopback: bool) -> str:
    """The checked ``jwks_uri`` of a metadata document for ``issuer``."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise FetchError("discovery document is not valid JSON") from None
    if not isinstance(document, dict):
        raise FetchError("discovery document is not a JSON object")
    found = document.get("issuer")
    if found != issuer:
        raise ConfigFaultError(issuer_mismatch(found, issuer))
    uri = document.get("jwks_uri")
    if not isinstance(uri, str):
        raise FetchError("discovery document has no jwks_uri")
    try:
        return check_url(uri, "jwks_uri", allow_insecure_loopback=allow_insecure_loopback)
    except ConfigurationError as exc:
        raise FetchError(f"discovery document: {exc.message}") from None


def issuer_mismatch(found: object, issuer: str) -> str:
    """Why a discovery document's ``issuer`` is refused: both values, and a near miss.

    A configuration fault, not an outage: the values are the configured
    issuer and the provider's own metadata (escaped and capped all the same).
    """
    if not isinstance(found, str):
        return f"discovery document has no issuer (a string); configured {_core.quoted(issuer)}"
    hint = _core.near_miss(found, issuer)
    if "{tenantid}" in found and "{tenantid}" not in issuer:
        hint = (
            f"a multi-tenant issuer template: pass issuer={_core.quoted(found)} and "
            'tenants=[...] (the tenant ids to accept, or "any") with this discover=, '
            "or Issuer(template, discover=..., tenants=[...]); see docs/issuers.md"
        )
    elif "{tenantid}" in issuer and "{tenantid}" not in found:
        hint = (
            "this document names one tenant's issuer; for the template, discover= the "
            "provider's multi-tenant metadata (for Entra ID: .../common/v2.0 or "
            ".../organizations/v2.0)"
        )
    return (
        f"discovery document names issuer {_core.quoted(found)}, configured "
        f"{_core.quoted(issuer)}: they must be equal, character for character"
        + (f" ({hint})" if hint else "")
    )
