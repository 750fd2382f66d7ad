"""Test tokens without an identity provider: a test issuer and its verifier.

:class:`TestIssuer` holds a key pair (ES256 by default), mints tokens with
sensible claims, publishes its JWKS (as a document, through an httpx
transport, or from a loopback HTTP server) and builds a
:class:`~grelmicro.jwt.JWTVerifier` that trusts it. Routes are tested with
real tokens carrying the scopes and roles each case needs, so every check
the service makes still runs::

    issuer = TestIssuer()
    app = create_app(issuer.verifier())
    client.get("/orders", headers=issuer.bearer(scope="orders:read"))

With pytest, ``pytest_plugins = ["grelmicro.jwt.testing.pytest"]`` in the
top ``conftest.py`` gives the fixtures ``jwt_issuer``, ``jwt_verifier`` and
``jwt_jwks_server`` (see :mod:`grelmicro.jwt.testing.pytest`).

Identity providers have test issuers of their own, shaped as they issue
tokens and publish metadata and keys: :class:`EntraTestIssuer` (tokens of
any tenant, v1 or v2, guests; the ``common``/``organizations`` metadata
naming ``{tenantid}``), :class:`B2CTestIssuer` (policy metadata),
:class:`CognitoTestIssuer` (access and ID tokens) and
:class:`KeycloakTestIssuer` (a realm). Each gives the
:mod:`grelmicro.jwt.providers` preset that trusts it (``preset()``) and
serves the provider's paths on loopback (``serve()``)::

    entra = EntraTestIssuer()
    verifier = entra.verifier(tenants=[A, B], versions=(1, 2))
    verifier.verify(entra.mint(tenant=A, version=1, scp="Orders.Read"))

HS256/384/512 sign with the standard library; the other algorithms need
``cryptography`` (``pip install "grelmicro[jwt,testing]"``). Test code only:
a :class:`TestIssuer` makes tokens that its verifier accepts, so it must
never be wired into a service that runs for real.
"""

from grelmicro.jwt.testing._entra import GUEST_HOME_TENANT, EntraTestIssuer
from grelmicro.jwt.testing._issuer import (
    ALGORITHMS,
    AUDIENCE,
    ISSUER,
    SUBJECT,
    ServedJWKS,
    TestIssuer,
)
from grelmicro.jwt.testing._providers import (
    TENANT,
    B2CTestIssuer,
    CognitoTestIssuer,
    KeycloakTestIssuer,
    ProviderTestIssuer,
    ServedProvider,
)

__all__ = [
    "ALGORITHMS",
    "AUDIENCE",
    "GUEST_HOME_TENANT",
    "ISSUER",
    "SUBJECT",
    "TENANT",
    "B2CTestIssuer",
    "CognitoTestIssuer",
    "EntraTestIssuer",
    "KeycloakTestIssuer",
    "ProviderTestIssuer",
    "ServedJWKS",
    "ServedProvider",
    "TestIssuer",
]
