"""Provider presets: one line per identity provider, plain data over :class:`Issuer`.

Each function returns the :class:`~grelmicro.jwt.Issuer` a careful user
would write by hand for that provider: its issuer string, where its keys
are (discovery or the JWKS URL it documents), and the claims its tokens
must carry. Nothing here is out of a user's reach: print the result
(``repr``) or read the few lines of each function to see what it sets.
Give the result to ``JWTVerifier(issuers=[...])``; several presets can
share one verifier.

Every preset takes ``**options``: any other :class:`~grelmicro.jwt.Issuer`
keyword (``leeway``, ``required``, ``allow_insecure_loopback`` for a test
server...). The host parts (``authority``, ``domain``, ``url``) take a
bare host or a full ``https://`` URL; a test passes its loopback URL there.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

from grelmicro.jwt._issuers import Issuer
from grelmicro.jwt._tenants import TenantsOption
from grelmicro.jwt.errors import ConfigurationError

__all__ = [
    "FIREBASE_JWKS",
    "FIREBASE_X509",
    "auth0",
    "cognito",
    "entra",
    "entra_b2c",
    "entra_multitenant",
    "firebase",
    "github_actions",
    "google",
    "keycloak",
    "kubernetes",
    "okta",
]

ENTRA = "https://login.microsoftonline.com"
Guests = Literal["allow", "refuse"]


def _base(host: str, what: str) -> str:
    """``host`` as an origin URL without a trailing slash (``https://`` added to a bare host)."""
    if not isinstance(host, str) or not host.strip("/"):
        raise ConfigurationError(f"{what} is a host name or an https URL")
    if "://" not in host:
        host = "https://" + host
    return host.rstrip("/")


def _entra_issuer(version: int, authority: str) -> tuple[str, str]:
    """Entra's issuer template and the metadata path under a tenant, by token version."""
    if version == 2:
        return f"{authority}/{{tenantid}}/v2.0", "/v2.0"
    if version == 1:
        # v1 tokens are issued by sts.windows.net whatever the authority.
        sts = "https://sts.windows.net" if authority == ENTRA else authority
        return f"{sts}/{{tenantid}}/", ""
    raise ConfigurationError("version is 1 or 2 (the API's accessTokenAcceptedVersion)")


def entra(
    tenant: str,
    *,
    audience: str | Sequence[str],
    version: Literal[1, 2] = 2,
    guests: Guests = "allow",
    authority: str = ENTRA,
    **options: Any,
) -> Issuer:
    """Microsoft Entra ID, one tenant (a single-tenant app registration).

    The issuer is Entra's template bound to ``tenant`` alone, so the token's
    ``tid`` is checked against its ``iss`` and ``claims.tenant`` is set;
    ``version`` is the access-token version your API registration accepts
    (``accessTokenAcceptedVersion``: 2, or 1 when unset: issuer
    ``https://sts.windows.net/<tenant>/``). Keys from the tenant's JWKS.
    ``guests="refuse"`` refuses B2B guests (``acct`` 1, or ``idp`` not ``iss``).
    """
    base = _base(authority, "authority")
    template, _ = _entra_issuer(version, base)
    return Issuer(
        template,
        jwks_url=f"{base}/{tenant}/discovery/v2.0/keys",
        tenants=[tenant],
        audience=audience,
        guests=guests,
        **options,
    )


def entra_multitenant(
    tenants: TenantsOption,
    *,
    audience: str | Sequence[str],
    version: Literal[1, 2] = 2,
    endpoint: Literal["organizations", "common"] = "organizations",
    guests: Guests = "allow",
    authority: str = ENTRA,
    **options: Any,
) -> Issuer:
    """Microsoft Entra ID, a multi-tenant app: the ``{tenantid}`` template, by discovery.

    ``tenants`` is the allow-list (ids, a callable, or ``"any"``: see
    docs/issuers.md); the metadata of ``endpoint`` names the template.
    """
    base = _base(authority, "authority")
    template, path = _entra_issuer(version, base)
    return Issuer(
        template,
        discover=f"{base}/{endpoint}{path}",
        tenants=tenants,
        audience=audience,
        guests=guests,
        **options,
    )


def entra_b2c(
    tenant_name: str,
    policy: str,
    *,
    tenant_id: str,
    audience: str | Sequence[str],
    authority: str | None = None,
    user_flows: str | Collection[str] | None = None,
    **options: Any,
) -> Issuer:
    """Azure AD B2C (and Entra External ID): one user flow, by its policy metadata.

    B2C's metadata lives under the policy
    (``https://<name>.b2clogin.com/<name>.onmicrosoft.com/<policy>/v2.0``)
    while its tokens name ``https://<name>.b2clogin.com/<tenant id>/v2.0/``:
    the issuer is given beside the metadata URL, and the document must name it.

    Every user flow of a tenant shares that issuer and its keys, so the
    token's ``tfp`` claim (the user flow that issued it) must be ``policy``,
    or one of ``user_flows`` when given: a token from another flow of the
    same tenant (a password reset, a flow without MFA) is refused. The user
    flows' "claim representing user flow" setting must be ``tfp`` (B2C's
    default); names compare exactly, as B2C writes them (``B2C_1_signin``).
    """
    base = _base(authority or f"{tenant_name}.b2clogin.com", "authority")
    values: dict[str, str | Collection[str]] = dict(options.pop("claim_values", None) or {})
    values["tfp"] = policy if user_flows is None else user_flows
    return Issuer(
        f"{base}/{tenant_id}/v2.0/",
        discover=f"{base}/{tenant_name}.onmicrosoft.com/{policy}/v2.0",
        audience=audience,
        claim_values=values,
        **options,
    )


def auth0(domain: str, *, audience: str | Sequence[str], **options: Any) -> Issuer:
    """Auth0: ``https://<tenant>.<region>.auth0.com/`` (or a custom domain), by discovery.

    Auth0's issuer ends with ``/``; ``audience`` is your API's identifier.
    """
    return Issuer(_base(domain, "domain") + "/", discover=True, audience=audience, **options)


def okta(
    domain: str,
    *,
    audience: str | Sequence[str],
    server: str | None = "default",
    **options: Any,
) -> Issuer:
    """Okta: a custom authorization server (``/oauth2/<server>``), or the org's with ``None``.

    Only a custom authorization server issues access tokens for your own APIs
    (``audience``, ``api://default`` for the default server).
    """
    base = _base(domain, "domain")
    issuer = base if server is None else f"{base}/oauth2/{server}"
    return Issuer(issuer, discover=True, audience=audience, **options)


def keycloak(url: str, realm: str, *, audience: str | Sequence[str], **options: Any) -> Issuer:
    """Keycloak: one realm (``<url>/realms/<realm>``), by discovery.

    Each realm has its own keys: another realm's token names another issuer
    and is refused before any fetch. Roles are under ``realm_access.roles``
    (``JWTBearer(role_claims=...)``); add an audience mapper so tokens carry
    your client in ``aud``.
    """
    return Issuer(
        f"{_base(url, 'url')}/realms/{realm}", discover=True, audience=audience, **options
    )


def cognito(
    user_pool_id: str,
    *,
    client_id: str | Collection[str],
    region: str | None = None,
    token_use: Literal["access", "id"] = "access",  # noqa: S107 - a claim value
    authority: str | None = None,
    **options: Any,
) -> Issuer:
    """Amazon Cognito: one user pool, access tokens by default.

    Access tokens carry no ``aud``: ``client_id`` and ``token_use:
    "access"`` are checked instead; ID tokens (``token_use="id"``) carry the
    app client in ``aud``. An ID token is refused where an access token is
    required, and the reverse.
    """
    if authority is None:
        if region is None:
            region = user_pool_id.split("_", 1)[0]
        authority = f"cognito-idp.{region}.amazonaws.com"
    issuer = f"{_base(authority, 'authority')}/{user_pool_id}"
    ids = [client_id] if isinstance(client_id, str) else list(client_id)
    if token_use == "id":  # noqa: S105 - a claim value
        return Issuer(
            issuer, discover=True, audience=ids, claim_values={"token_use": "id"}, **options
        )
    return Issuer(
        issuer,
        discover=True,
        claim_values={"token_use": "access", "client_id": ids},
        **options,
    )


def google(client_id: str | Sequence[str], **options: Any) -> Issuer:
    """Google Sign-In ID tokens: issuer ``https://accounts.google.com``, ``aud`` your client id.

    Google also writes ``iss`` as ``accounts.google.com`` (without
    ``https://``): for both, see the Google recipe in docs/keys-and-providers.md.
    """
    return Issuer(
        options.pop("issuer", "https://accounts.google.com"),
        jwks_url=options.pop("jwks_url", "https://www.googleapis.com/oauth2/v3/certs"),
        audience=client_id,
        **options,
    )


#: Firebase's keys for ``securetoken`` ID tokens as JWKs (Google's JWK form).
FIREBASE_JWKS = (
    "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"
)
#: The same keys as Firebase documents them: an object of ``kid`` to PEM X.509 certificate.
FIREBASE_X509 = (
    "https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"
)


def firebase(
    project_id: str, *, key_form: Literal["jwk", "x509"] = "jwk", **options: Any
) -> Issuer:
    """Firebase Authentication ID tokens: issuer ``https://securetoken.google.com/<project>``.

    The audience is the project id. ``key_form`` picks which of Google's two
    publications of the ``securetoken`` keys is fetched: ``"jwk"``
    (:data:`FIREBASE_JWKS`, a JWKS) or ``"x509"`` (:data:`FIREBASE_X509`,
    the endpoint Firebase's documentation names: ``kid`` to PEM certificate,
    read as RS256 keys). Both carry the same keys and a ``Cache-Control``
    max-age that the key source follows; ``jwks_url=`` replaces either.
    """
    if key_form not in ("jwk", "x509"):
        raise ConfigurationError('key_form is "jwk" or "x509"')
    return Issuer(
        options.pop("issuer", f"https://securetoken.google.com/{project_id}"),
        jwks_url=options.pop("jwks_url", FIREBASE_X509 if key_form == "x509" else FIREBASE_JWKS),
        audience=project_id,
        **options,
    )


def github_actions(
    *,
    repository: str | Collection[str],
    audience: str | Sequence[str],
    ref: str | Collection[str] | None = None,
    environment: str | Collection[str] | None = None,
    issuer: str = "https://token.actions.githubusercontent.com",
    **options: Any,
) -> Issuer:
    """GitHub Actions OIDC tokens: ``repository`` (and ``ref``, ``environment``) as the policy.

    Every workflow of every repository on GitHub gets tokens from this one
    issuer: the ``repository`` check is what makes a token yours. Set
    ``audience`` to what the workflow requests (``core.getIDToken(audience)``).
    """
    values: dict[str, str | Collection[str]] = {"repository": repository}
    if ref is not None:
        values["ref"] = ref
    if environment is not None:
        values["environment"] = environment
    return Issuer(issuer, discover=True, audience=audience, claim_values=values, **options)


def kubernetes(
    issuer: str,
    *,
    audience: str | Sequence[str],
    jwks_url: str | None = None,
    **options: Any,
) -> Issuer:
    """Kubernetes service-account tokens (projected volumes, ``TokenRequest``).

    ``issuer`` is the cluster's ``--service-account-issuer``; its keys by
    discovery (``/.well-known/openid-configuration``, served by the API
    server), or ``jwks_url`` (``/openid/v1/jwks``) when discovery is not
    reachable. ``audience`` is the one the projected token requests.
    """
    if jwks_url is not None:
        return Issuer(issuer, jwks_url=jwks_url, audience=audience, **options)
    return Issuer(issuer, discover=True, audience=audience, **options)
