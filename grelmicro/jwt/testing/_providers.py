"""Test issuers shaped as identity providers: tokens, metadata and key sets as they publish them.

Each class is a :class:`~grelmicro.jwt.testing.TestIssuer` whose tokens carry
the provider's claims (Entra ID's ``tid``/``oid``/``ver``, Cognito's
``token_use``, Keycloak's ``realm_access``...), whose loopback server
answers the provider's metadata and key-set paths with the provider's
members, and whose :meth:`~ProviderTestIssuer.preset` is the
:mod:`grelmicro.jwt.providers` preset a service configures, pointed at
wherever the issuer is (the provider's real host, or the loopback server
inside ``serve()``). :meth:`~ProviderTestIssuer.verifier` is that preset's
policy over the issuer's keys given in code (no HTTP).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import httpx

from grelmicro.jwt import providers
from grelmicro.jwt._config import AlgorithmName
from grelmicro.jwt._demo import signing_key
from grelmicro.jwt._issuers import Issuer
from grelmicro.jwt._keys import Key
from grelmicro.jwt._tenants import valid_tenant
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.errors import ConfigurationError
from grelmicro.jwt.providers import _base
from grelmicro.jwt.testing._issuer import AUDIENCE, SUBJECT, ServedJWKS, TestIssuer, _response

__all__ = [
    "TENANT",
    "B2CTestIssuer",
    "CognitoTestIssuer",
    "KeycloakTestIssuer",
    "ProviderTestIssuer",
    "ServedProvider",
]

#: The default tenant of the Entra and B2C test issuers (a GUID, as Entra's are).
TENANT = "11111111-1111-4111-8111-111111111111"


def _loopback(authority: str) -> bool:
    return authority.startswith(("http://127.0.0.1:", "http://localhost:", "http://[::1]:"))


def _with_keys(preset: Issuer, keys: Sequence[Key], tenants: object) -> Issuer:
    """``preset``'s policy (issuer, audience, claim values, guests) over keys given in code."""
    return Issuer(
        preset.issuer,
        keys=keys,
        tenants=tenants if preset.template is not None else None,  # type: ignore[arg-type]
        tenant_claim=preset.tenant_claim,
        guests=preset.guests,
        claim_values=dict(preset.claim_values) or None,
        allow_weaker=preset.allow_weaker,
        **preset.policy,  # type: ignore[arg-type]
    )


class ServedProvider(ServedJWKS):
    """A loopback server answering a provider's metadata and key-set paths.

    Built by :meth:`ProviderTestIssuer.serve`. :attr:`url` is what a preset
    takes as its host (``authority=``, ``url=``, ``domain=``);
    :attr:`discovery_url` and :attr:`jwks_url` are the provider's own paths
    on it; ``paths`` counts the GETs per path.
    """

    def __init__(self, issuer: ProviderTestIssuer, *, port: int = 0) -> None:
        self._provider = issuer
        super().__init__(issuer, port=port)

    @property
    def jwks_url(self) -> str:
        """The key set, at the provider's path."""
        return self.url + self._provider.jwks_path

    @property
    def discovery_url(self) -> str:
        """The metadata document, at the provider's path."""
        return self.url + self._provider.metadata_path + "/.well-known/openid-configuration"

    def preset(self, **options: Any) -> Issuer:
        """The issuer's :meth:`~ProviderTestIssuer.preset` (it points here inside the block)."""
        return self._provider.preset(**options)


class ProviderTestIssuer(TestIssuer):
    """A :class:`~grelmicro.jwt.testing.TestIssuer` shaped as one identity provider.

    Subclasses say where the provider's issuer, metadata and key set are
    under its host (:attr:`authority`), how its tokens and keys look, and
    which :mod:`grelmicro.jwt.providers` preset trusts it.
    """

    __test__ = False

    #: The provider's host as an origin URL (the loopback server's inside ``serve()``).
    authority: str

    def __init__(
        self,
        authority: str,
        *,
        algorithm: AlgorithmName = "RS256",
        audience: str | Sequence[str] = AUDIENCE,
        subject: str = SUBJECT,
        kid: str = "test-key-1",
        lifetime: float = 300,
        clock: Callable[[], float] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> None:
        self.authority = _base(authority, "authority")
        super().__init__(
            algorithm,
            issuer=self._issuer_name(),
            audience=audience,
            subject=subject,
            kid=kid,
            lifetime=lifetime,
            clock=clock,
            claims=claims,
        )

    # -- what each provider says -------------------------------------------------------

    def _issuer_name(self) -> str:
        """The ``iss`` of this issuer's tokens under :attr:`authority`."""
        raise NotImplementedError

    @property
    def metadata_path(self) -> str:
        """Where the provider's metadata is, under its host (before ``/.well-known/...``)."""
        raise NotImplementedError

    @property
    def jwks_path(self) -> str:
        """Where the provider's key set is, under its host."""
        raise NotImplementedError

    def preset(self, **options: Any) -> Issuer:
        """The :mod:`grelmicro.jwt.providers` preset that trusts this issuer where it is now."""
        raise NotImplementedError

    def provider_jwks(self) -> dict[str, Any]:
        """The key set with the members the provider publishes."""
        return self.jwks

    def metadata(self, base: str, path: str) -> dict[str, Any] | None:
        """The metadata document the provider serves at ``path`` (None: 404)."""
        if path != self.metadata_path:
            return None
        return {
            "issuer": self.issuer,
            "jwks_uri": base + self.jwks_path,
            "id_token_signing_alg_values_supported": sorted({k.algorithm for k in self._keys}),
            "response_types_supported": ["code"],
        }

    # -- shared ------------------------------------------------------------------------

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        if _loopback(self.authority):
            options.setdefault("allow_insecure_loopback", True)
        return options

    def verifier(self, **options: Any) -> JWTVerifier:
        """A verifier with :meth:`preset`'s policy over this issuer's keys (no HTTP).

        ``options`` go to :meth:`preset` (``token_use=``, ``tenants=``...);
        the verifier reads the issuer's clock.
        """
        tenants = options.get("tenants")
        preset = self.preset(**options)
        return JWTVerifier(issuers=[_with_keys(preset, self.keys, tenants)], clock=self._clock)

    def _document(self, path: str, base: str) -> Mapping[str, Any] | None:
        suffix = "/.well-known/openid-configuration"
        if path.endswith(suffix):
            return self.metadata(base, path[: -len(suffix)])
        if path == self.jwks_path:
            return self.provider_jwks()
        return None

    @property
    def jwks_url(self) -> str:
        """The provider's key set under :attr:`authority` (what :meth:`transport` answers)."""
        return self.authority + self.jwks_path

    @property
    def discovery_url(self) -> str:
        """The provider's metadata under :attr:`authority`."""
        return self.authority + self.metadata_path + "/.well-known/openid-configuration"

    def _answer(self, request: httpx.Request) -> httpx.Response:
        """:meth:`transport`: the provider's paths under :attr:`authority`, with no socket."""
        url = str(request.url.copy_with(query=None))
        if request.method != "GET":
            return httpx.Response(405)
        body = None
        if url.startswith(self.authority + "/"):
            body = self._document(url[len(self.authority) :], self.authority)
        return httpx.Response(404) if body is None else _response(body)

    def _moved(self) -> None:
        """:attr:`authority` changed: the issuer follows."""
        self.issuer = self._issuer_name()

    @contextlib.contextmanager
    def serve(self, *, as_issuer: bool = True, port: int = 0) -> Iterator[ServedProvider]:
        """Serve the provider's metadata and key set on 127.0.0.1 (a random port, or ``port``).

        Inside the block the server is the provider's host
        (:attr:`authority` is ``server.url``): tokens name it, its metadata
        names it, and :meth:`preset` points at it (plain http on loopback
        allowed). ``as_issuer=False`` keeps the real host in the tokens and
        in the metadata, served from here: configure the verifier with
        ``discover=server.discovery_url`` yourself.
        """
        self.jwks  # noqa: B018 - refused here (an HS* issuer publishes none)
        server = ServedProvider(self, port=port)
        previous = self.authority
        if as_issuer:
            self.authority = server.url
            self._moved()
        try:
            yield server
        finally:
            self.authority = previous
            self._moved()
            server.stop()


class B2CTestIssuer(ProviderTestIssuer):
    """Azure AD B2C (Entra External ID): one user flow's tokens and policy metadata.

    Tokens name ``https://<name>.b2clogin.com/<tenant id>/v2.0/`` and carry
    ``tfp`` (the policy), ``ver`` ``1.0``, ``oid`` (= ``sub``),
    ``auth_time``; ``aud`` is the application's client id. The metadata
    is under the policy,
    ``/<name>.onmicrosoft.com/<policy>/v2.0/.well-known/openid-configuration``,
    and names the issuer beside it (what ``providers.entra_b2c`` discovers).
    """

    __test__ = False

    def __init__(
        self,
        tenant_name: str = "contoso",
        policy: str = "B2C_1_signin",
        *,
        tenant_id: str = TENANT,
        audience: str | Sequence[str] = "33333333-3333-4333-8333-333333333333",
        authority: str | None = None,
        subject: str = SUBJECT,
        algorithm: AlgorithmName = "RS256",
        kid: str = "test-key-1",
        lifetime: float = 300,
        clock: Callable[[], float] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> None:
        for name, value in (("tenant_name", tenant_name), ("policy", policy)):
            if not isinstance(value, str) or not valid_tenant(value):
                raise ConfigurationError(f"{name} is one path segment of letters, digits, - or _")
        if not valid_tenant(tenant_id):
            raise ConfigurationError("tenant_id is one path segment (a GUID)")
        self.tenant_name = tenant_name
        self.policy = policy
        self.tenant_id = tenant_id
        super().__init__(
            authority or f"https://{tenant_name}.b2clogin.com",
            algorithm=algorithm,
            audience=audience,
            subject=subject,
            kid=kid,
            lifetime=lifetime,
            clock=clock,
            claims=claims,
        )

    def _issuer_name(self) -> str:
        return f"{self.authority}/{self.tenant_id}/v2.0/"

    @property
    def metadata_path(self) -> str:
        """``/<name>.onmicrosoft.com/<policy>/v2.0``."""
        return f"/{self.tenant_name}.onmicrosoft.com/{self.policy}/v2.0"

    @property
    def jwks_path(self) -> str:
        """``/<name>.onmicrosoft.com/<policy>/discovery/v2.0/keys``."""
        return f"/{self.tenant_name}.onmicrosoft.com/{self.policy}/discovery/v2.0/keys"

    def claims(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """The payload :meth:`mint` signs, with B2C's claims."""
        issued = int(self.now() if now is None else now)
        subject = more.get("sub", (claims or {}).get("sub", self.subject))
        shaped = {
            "ver": "1.0",
            "nbf": issued,
            "auth_time": issued,
            "oid": subject,
            "tfp": self.policy,
            "jti": None,
        }
        return super().claims(
            {**shaped, **(claims or {}), **more}, now=issued, expires_in=expires_in
        )

    def preset(self, **options: Any) -> Issuer:
        """``providers.entra_b2c(tenant_name, policy, tenant_id=..., ...)`` pointed at this host."""
        options = self._options(options)
        options.setdefault("audience", self.audience)
        return providers.entra_b2c(
            self.tenant_name,
            self.policy,
            tenant_id=self.tenant_id,
            authority=self.authority,
            **options,
        )

    def provider_jwks(self) -> dict[str, Any]:
        """B2C's key set: ``kid``, ``nbf``, ``use``, ``kty`` and the key, no ``alg``."""
        keys = []
        for jwk in self.jwks["keys"]:
            member = {"kid": jwk["kid"], "nbf": 1_493_763_266, "use": "sig"}
            member.update({k: v for k, v in jwk.items() if k not in {"kid", "use", "alg"}})
            if jwk.get("alg") != "RS256":
                member["alg"] = jwk["alg"]
            keys.append(member)
        return {"keys": keys}


class CognitoTestIssuer(ProviderTestIssuer):
    """Amazon Cognito: one user pool's access and ID tokens.

    Access tokens (the default) carry no ``aud``: ``client_id``,
    ``token_use`` ``access``, ``scope``, ``username``. ``mint(token_use="id")``
    makes an ID token: ``aud`` the client id, ``token_use`` ``id``,
    ``cognito:username``. The metadata is at
    ``/<pool>/.well-known/openid-configuration`` and the keys at
    ``/<pool>/.well-known/jwks.json`` under
    ``https://cognito-idp.<region>.amazonaws.com``.
    """

    __test__ = False

    def __init__(
        self,
        user_pool_id: str = "eu-west-1_TestPool1",
        *,
        client_id: str = "test-client-id",
        authority: str | None = None,
        subject: str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
        algorithm: AlgorithmName = "RS256",
        kid: str = "test-key-1",
        lifetime: float = 300,
        clock: Callable[[], float] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(user_pool_id, str) or not valid_tenant(user_pool_id):
            raise ConfigurationError("user_pool_id is <region>_<id>, one path segment")
        self.user_pool_id = user_pool_id
        self.client_id = client_id
        region = user_pool_id.split("_", 1)[0]
        super().__init__(
            authority or f"https://cognito-idp.{region}.amazonaws.com",
            algorithm=algorithm,
            audience=client_id,
            subject=subject,
            kid=kid,
            lifetime=lifetime,
            clock=clock,
            claims=claims,
        )

    def _issuer_name(self) -> str:
        return f"{self.authority}/{self.user_pool_id}"

    @property
    def metadata_path(self) -> str:
        """``/<pool>``."""
        return f"/{self.user_pool_id}"

    @property
    def jwks_path(self) -> str:
        """``/<pool>/.well-known/jwks.json``."""
        return f"/{self.user_pool_id}/.well-known/jwks.json"

    def claims(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        token_use: Literal["access", "id"] = "access",  # noqa: S107 - a claim value
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """The payload :meth:`mint` signs: an access token, or an ID token (``token_use="id"``)."""
        issued = int(self.now() if now is None else now)
        subject = more.get("sub", (claims or {}).get("sub", self.subject))
        shaped: dict[str, Any] = {
            "token_use": token_use,
            "auth_time": issued,
            "origin_jti": str(uuid.uuid4()),
            "event_id": str(uuid.uuid4()),
        }
        if token_use == "access":  # noqa: S105 - a claim value
            shaped.update(
                aud=None,
                client_id=self.client_id,
                scope="aws.cognito.signin.user.admin",
                username=subject,
                version=2,
            )
        elif token_use == "id":  # noqa: S105
            shaped.update({"cognito:username": subject, "jti": None})
        else:
            raise ConfigurationError('token_use is "access" or "id"')
        return super().claims(
            {**shaped, **(claims or {}), **more}, now=issued, expires_in=expires_in
        )

    def mint(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        token_use: Literal["access", "id"] = "access",  # noqa: S107 - a claim value
        header: Mapping[str, Any] | None = None,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> str:
        """A signed access token, or an ID token with ``token_use="id"``."""
        return super().mint(
            claims, header=header, now=now, expires_in=expires_in, token_use=token_use, **more
        )

    def bearer(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        token_use: Literal["access", "id"] = "access",  # noqa: S107 - a claim value
        header: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, str]:
        """``{"Authorization": "Bearer <token>"}``; arguments as :meth:`mint`."""
        return super().bearer(claims, header=header, token_use=token_use, **more)

    def preset(self, **options: Any) -> Issuer:
        """``providers.cognito(pool, client_id=..., ...)`` pointed at this host."""
        options = self._options(options)
        options.setdefault("client_id", self.client_id)
        return providers.cognito(self.user_pool_id, authority=self.authority, **options)

    def provider_jwks(self) -> dict[str, Any]:
        """Cognito's key set: ``alg``, ``e``, ``kid``, ``kty``, ``n``, ``use``."""
        return {"keys": [{name: jwk[name] for name in sorted(jwk)} for jwk in self.jwks["keys"]]}


class KeycloakTestIssuer(ProviderTestIssuer):
    """Keycloak: one realm's access tokens, metadata and certificates endpoint.

    Tokens name ``<url>/realms/<realm>`` and carry ``typ`` ``Bearer``,
    ``azp`` (the client), ``realm_access.roles`` (``roles=`` goes there),
    ``scope``, ``preferred_username`` and ``sid``; ``mint(realm="other")``
    makes another realm's token. The server answers this realm only (its
    metadata, and its certificates with an encryption key beside the
    signing key, as Keycloak lists them); another realm is a 404.
    """

    __test__ = False

    def __init__(
        self,
        realm: str = "test",
        *,
        audience: str | Sequence[str] = "test-api",
        client: str = "test-client",
        url: str = "https://keycloak.test",
        subject: str = "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b",
        algorithm: AlgorithmName = "RS256",
        kid: str = "test-key-1",
        lifetime: float = 300,
        clock: Callable[[], float] | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(realm, str) or not valid_tenant(realm):
            raise ConfigurationError("realm is one path segment of letters, digits, - or _")
        self.realm = realm
        self.client = client
        self._encryption: dict[str, Any] | None = None
        super().__init__(
            url,
            algorithm=algorithm,
            audience=audience,
            subject=subject,
            kid=kid,
            lifetime=lifetime,
            clock=clock,
            claims=claims,
        )

    def _issuer_name(self) -> str:
        return f"{self.authority}/realms/{self.realm}"

    @property
    def metadata_path(self) -> str:
        """``/realms/<realm>``."""
        return f"/realms/{self.realm}"

    @property
    def jwks_path(self) -> str:
        """``/realms/<realm>/protocol/openid-connect/certs``."""
        return f"/realms/{self.realm}/protocol/openid-connect/certs"

    def claims(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        realm: str | None = None,
        roles: str | Sequence[str] | None = None,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """The payload :meth:`mint` signs; ``realm`` names another realm, ``roles`` its roles."""
        subject = more.get("sub", (claims or {}).get("sub", self.subject))
        if isinstance(roles, str):
            roles = [roles]
        shaped: dict[str, Any] = {
            "typ": "Bearer",
            "azp": self.client,
            "sid": str(uuid.uuid4()),
            "scope": "openid profile email",
            "preferred_username": subject,
            "realm_access": {
                "roles": list(roles) if roles is not None else [f"default-roles-{self.realm}"]
            },
        }
        if realm is not None:
            shaped["iss"] = f"{self.authority}/realms/{realm}"
        return super().claims({**shaped, **(claims or {}), **more}, now=now, expires_in=expires_in)

    def mint(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        realm: str | None = None,
        roles: str | Sequence[str] | None = None,
        header: Mapping[str, Any] | None = None,
        now: float | None = None,
        expires_in: float | None = None,
        **more: Any,
    ) -> str:
        """A signed token; ``realm`` names another realm, ``roles`` go in ``realm_access``."""
        return super().mint(
            claims, header=header, now=now, expires_in=expires_in, realm=realm, roles=roles, **more
        )

    def bearer(
        self,
        claims: Mapping[str, Any] | None = None,
        /,
        *,
        realm: str | None = None,
        roles: str | Sequence[str] | None = None,
        header: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, str]:
        """``{"Authorization": "Bearer <token>"}``; arguments as :meth:`mint`."""
        return super().bearer(claims, header=header, realm=realm, roles=roles, **more)

    def preset(self, **options: Any) -> Issuer:
        """``providers.keycloak(url, realm, audience=...)`` pointed at this host."""
        options = self._options(options)
        options.setdefault("audience", self.audience)
        return providers.keycloak(self.authority, self.realm, **options)

    def provider_jwks(self) -> dict[str, Any]:
        """Keycloak's certificates: the signing keys, then an RSA-OAEP key (``use`` ``enc``)."""
        if self._encryption is None:
            jwk = signing_key("RS256", "enc-1").jwk
            assert jwk is not None  # noqa: S101 - an RSA key has one
            self._encryption = {**jwk, "alg": "RSA-OAEP", "use": "enc"}
        return {"keys": [*self.jwks["keys"], dict(self._encryption)]}
