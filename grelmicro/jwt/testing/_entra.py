"""Microsoft Entra ID for tests: tokens of any tenant, v1 or v2 (see :class:`EntraTestIssuer`)."""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from grelmicro.jwt import providers
from grelmicro.jwt._config import AlgorithmName
from grelmicro.jwt._issuers import Issuer
from grelmicro.jwt._tenants import PLACEHOLDER, TenantsOption, valid_tenant
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.errors import ConfigurationError
from grelmicro.jwt.providers import ENTRA, _entra_issuer
from grelmicro.jwt.testing._issuer import AUDIENCE, SUBJECT
from grelmicro.jwt.testing._providers import TENANT, ProviderTestIssuer, _with_keys

__all__ = ["GUEST_HOME_TENANT", "EntraTestIssuer"]

#: The home tenant a guest token's ``idp`` names (:meth:`EntraTestIssuer.mint` ``guest=True``).
GUEST_HOME_TENANT = "99999999-9999-4999-8999-999999999999"
#: Entra's personal-accounts (MSA) tenant: what its ``consumers`` metadata names.
_CONSUMERS = "9188040d-6c67-4c5b-b112-36a304b66dad"
_OIDS = uuid.UUID("6ba7b812-9dad-11d1-80b4-00c04fd430c8")  # uuid.NAMESPACE_X500

Version = Literal[1, 2]


def _scopes(value: object) -> object:
    """A list of scopes as the space-separated string providers write."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    if isinstance(value, (list, tuple)):
        return " ".join(str(item) for item in value)
    return value


class EntraTestIssuer(ProviderTestIssuer):
    """Microsoft Entra ID: one key set, tokens of any tenant, v1 or v2 shaped.

    ``mint(tenant=..., version=1 | 2)`` writes Entra's access-token claims:
    ``iss`` (v2 ``https://login.microsoftonline.com/<tid>/v2.0``, v1
    ``https://sts.windows.net/<tid>/``), ``tid``, ``oid`` (stable per tenant
    and subject), ``ver``, ``azp`` (v2) or ``appid`` (v1), ``nbf``, ``uti``,
    and ``scp``/``roles`` when given (``scp`` may be a list). ``guest=True``
    makes a B2B guest's token (``acct`` 1, ``idp`` its home tenant).

    Its server answers the ``common``, ``organizations`` and ``consumers``
    metadata (v2 under ``/v2.0``, v1 without) with the ``{tenantid}``
    issuer, a tenant's own metadata, and the key set at
    ``/<tenant or endpoint>/discovery[/v2.0]/keys`` with Entra's members
    (no ``alg``; the v2 set names the issuer template per key).

    Args:
        tenant: the default tenant of :meth:`mint`.
        version: the default token version (your API's
            ``accessTokenAcceptedVersion``).
        client_id: the calling app, written as ``azp`` (v2) or ``appid`` (v1).
        authority: Entra's host; the loopback server's inside ``serve()``.

    The other arguments are :class:`~grelmicro.jwt.testing.TestIssuer`'s.
    """

    __test__ = False

    def __init__(
        self,
        *,
        tenant: str = TENANT,
        version: Version = 2,
        audience: str | Sequence[str] = AUDIENCE,
        client_id: str = "22222222-2222-4222-8222-222222222222",
        authority: str = ENTRA,
        subject: str = SUBJECT,
        algorithm: AlgorithmName = "RS256",
        kid: str = "test-key-1",
        lifetime: float = 300,
        clock: Callable[[], float] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> None:
        if not valid_tenant(tenant):
            raise ConfigurationError("tenant is one path segment of letters, digits, - or _")
        _version(version)
        self.tenant = tenant
        self.version: Version = version
        self.client_id = client_id
        super().__init__(
            authority,
            algorithm=algorithm,
            audience=audience,
            subject=subject,
            kid=kid,
            lifetime=lifetime,
            clock=clock,
            claims=claims,
        )

    def template(self, version: Version | None = None) -> str:
        """The issuer template of ``version`` tokens (``.../{tenantid}/v2.0`` or v1's)."""
        chosen = _version(self.version if version is None else version)
        return _entra_issuer(chosen, self.authority)[0]

    def issuer_for(self, tenant: str, version: Version | None = None) -> str:
        """The ``iss`` of ``tenant``'s tokens of ``version``."""
        return self.template(version).replace(PLACEHOLDER, tenant)

    def _issuer_name(self) -> str:
        return self.template(self.version)

    @property
    def metadata_path(self) -> str:
        """The multi-tenant metadata a preset discovers: ``/organizations[/v2.0]``."""
        return "/organizations" + ("/v2.0" if self.version == 2 else "")

    @property
    def jwks_path(self) -> str:
        """The ``common`` key set of the default version."""
        return "/common/discovery" + ("/v2.0" if self.version == 2 else "") + "/keys"

    def claims(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        tenant: str | None = None,
        version: Version | None = None,
        guest: bool = False,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """The payload :meth:`mint` signs; ``tenant``, ``version`` and ``guest`` as above."""
        tenant = self.tenant if tenant is None else tenant
        if not isinstance(tenant, str):
            raise ConfigurationError("tenant is a string")
        version = _version(self.version if version is None else version)
        issued = int(self.now() if now is None else now)
        subject = more.get("sub", (claims or {}).get("sub", self.subject))
        shaped: dict[str, Any] = {
            "iss": self.issuer_for(tenant, version),
            "nbf": issued,
            "tid": tenant,
            "oid": str(uuid.uuid5(_OIDS, f"{tenant}/{subject}")),
            "uti": secrets.token_urlsafe(16),
            "ver": f"{version}.0",
            "jti": None,  # Entra's access tokens carry uti, not jti
        }
        if version == 2:
            shaped.update(azp=self.client_id, azpacr="0")
        else:
            shaped.update(appid=self.client_id, appidacr="0")
        if guest:
            shaped.update(acct=1, idp=f"https://sts.windows.net/{GUEST_HOME_TENANT}/")
        payload = {**shaped, **(claims or {}), **more}
        if "scp" in payload:
            payload["scp"] = _scopes(payload["scp"])
        return super().claims(payload, now=issued, expires_in=expires_in)

    def mint(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        tenant: str | None = None,
        version: Version | None = None,
        guest: bool = False,
        header: Mapping[str, Any] | None = None,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> str:
        """A signed token of ``tenant`` (default: the issuer's), ``version`` 2 or 1.

        ``guest=True`` makes a B2B guest's token; the other arguments are
        :class:`~grelmicro.jwt.testing.TestIssuer`'s.
        """
        entra = {"tenant": tenant, "version": version, "guest": guest}
        return super().mint(claims, header=header, now=now, expires_in=expires_in, **entra, **more)

    def bearer(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        tenant: str | None = None,
        version: Version | None = None,
        guest: bool = False,
        header: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, str]:
        """``{"Authorization": "Bearer <token>"}``; arguments as :meth:`mint`."""
        entra = {"tenant": tenant, "version": version, "guest": guest}
        return super().bearer(claims, header=header, **entra, **more)

    def preset(
        self,
        *,
        tenants: TenantsOption | None = None,
        tenant: str | None = None,
        version: Version | None = None,
        guests: Literal["allow", "refuse"] = "allow",
        endpoint: Literal["organizations", "common"] = "organizations",
        **options: Any,
    ) -> Issuer:
        """``providers.entra_multitenant(tenants, ...)``, or ``providers.entra(tenant, ...)``.

        Give ``tenants`` (a multi-tenant app: ids, a callable or ``"any"``)
        or ``tenant`` (a single-tenant app); ``version`` defaults to the
        issuer's; the audience is the issuer's unless ``audience=`` is given.
        """
        if (tenants is None) == (tenant is None):
            raise ConfigurationError("give tenants= (multi-tenant) or tenant= (single tenant)")
        options = self._options(options)
        options.setdefault("audience", self.audience)
        chosen = _version(self.version if version is None else version)
        if tenant is not None:
            return providers.entra(
                tenant, version=chosen, guests=guests, authority=self.authority, **options
            )
        assert tenants is not None  # noqa: S101 - checked above
        return providers.entra_multitenant(
            tenants,
            version=chosen,
            endpoint=endpoint,
            guests=guests,
            authority=self.authority,
            **options,
        )

    def verifier(
        self, *, versions: Collection[Version] | None = None, **options: Any
    ) -> JWTVerifier:
        """A verifier over this issuer's keys with the Entra preset's policy (no HTTP).

        Keywords as :meth:`preset` (``tenants=`` by default the issuer's
        ``[tenant]``), plus ``versions=(1, 2)`` to accept both token
        versions (one template each, as a service accepting both configures).
        """
        if versions is None:
            version = options.pop("version", None)
            versions = (self.version if version is None else version,)
        elif "version" in options:
            raise ConfigurationError("give version= or versions=, not both")
        if "tenant" not in options and "tenants" not in options:
            options["tenants"] = [self.tenant]
        tenants = options["tenants"] if "tenants" in options else [options["tenant"]]
        issuers = [
            _with_keys(self.preset(version=version, **options), self.keys, tenants)
            for version in versions
        ]
        return JWTVerifier(issuers=issuers, clock=self._clock)

    def provider_jwks(self) -> dict[str, Any]:
        """Entra's key set: no ``alg`` on RS256 keys, ``issuer`` (the v2 template) on each."""
        return self._entra_keys(2)

    def _entra_keys(self, version: int) -> dict[str, Any]:
        keys = []
        for jwk in self.jwks["keys"]:
            member = {name: value for name, value in jwk.items() if name != "alg"}
            if jwk.get("alg") != "RS256":  # Entra signs RS256; keep another algorithm said
                member["alg"] = jwk["alg"]
            member["cloud_instance_name"] = "microsoftonline.com"
            if version == 2:
                member["issuer"] = self.template(2)
            keys.append(member)
        return {"keys": keys}

    def metadata(self, base: str, path: str) -> dict[str, Any] | None:
        """Entra's metadata: ``common``/``organizations`` name ``{tenantid}``, a tenant itself."""
        found = re.fullmatch(r"/([A-Za-z0-9_-]{1,64})(/v2\.0)?", path)
        if found is None:
            return None
        segment, v2 = found[1], found[2] is not None
        tenant = {"common": PLACEHOLDER, "organizations": PLACEHOLDER, "consumers": _CONSUMERS}
        version: Version = 2 if v2 else 1
        keys = f"{base}/{segment}/discovery" + ("/v2.0" if v2 else "") + "/keys"
        oauth = f"{base}/{segment}/oauth2" + ("/v2.0" if v2 else "")
        return {
            "token_endpoint": oauth + "/token",
            "jwks_uri": keys,
            "issuer": self.issuer_for(tenant.get(segment, segment), version),
            "authorization_endpoint": oauth + "/authorize",
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "token id_token"],
            "tenant_region_scope": None,
            "cloud_instance_name": "microsoftonline.com",
        }

    def _document(self, path: str, base: str) -> Mapping[str, Any] | None:
        keys = re.fullmatch(r"/[A-Za-z0-9_-]{1,64}/discovery(/v2\.0)?/keys", path)
        if keys is not None:
            return self._entra_keys(2 if keys[1] else 1)
        return super()._document(path, base)


def _version(version: object) -> Version:
    if version not in (1, 2) or isinstance(version, bool):
        raise ConfigurationError("version is 1 or 2 (Entra's token versions)")
    return version
