"""Bearer-token (JWT) verification for Python services.

Build one :class:`JWTVerifier` at startup and call ``verify(token)`` on every
request. The work is done by the compiled core (``grelmicro-core``): strict
compact-JWS parsing, key selection by ``kid`` and ``alg``, signature checks
with aws-lc-rs and registered-claim checks, in one call (signature checks
with the GIL released, except HMAC over tokens below 2 KiB). Verified
tokens are cached until their ``exp`` (or ``cache_ttl``).

Example:
    >>> from grelmicro.jwt import JWTVerifier, Key
    >>> verifier = JWTVerifier(
    ...     keys=[Key.pem(public_pem, "RS256", kid="k1")],
    ...     audience="https://api.example.com",
    ...     issuer="https://idp.example.com/",
    ... )  # doctest: +SKIP
    >>> verifier.verify(token).subject  # doctest: +SKIP
    'user-1'

Outside FastAPI, :func:`require_scopes`, :func:`require_roles` and
:func:`require_tenant` check what a verified token grants (raising the 403
errors), :mod:`grelmicro.jwt.challenges` turns any error into its HTTP
answer, and :mod:`grelmicro.jwt.guard` does a whole request's check;
``grelmicro.jwt.flask``, ``.django``, ``.drf``, ``.wsgi`` and ``.asgi`` wire
them into those frameworks.
"""

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._config import IssuerSettings, JWTConfig, JWTSettings
from grelmicro.jwt._core import unverified_header as _unverified_header
from grelmicro.jwt._dpop import (
    DPoPNonces,
    DPoPVerifier,
    ReplayBackend,
    ReplayStore,
    jwk_thumbprint,
)
from grelmicro.jwt._grants import require_roles, require_scopes, require_tenant
from grelmicro.jwt._health import TenantLookupHealth
from grelmicro.jwt._issuers import Issuer
from grelmicro.jwt._jwks import FetchOptions, KeySourceHealth
from grelmicro.jwt._keys import Key
from grelmicro.jwt._profiles import access_token_profile
from grelmicro.jwt._replay_redis import RedisReplayStore
from grelmicro.jwt._verifier import CacheInfo, JWTVerifier, VerifyFunction
from grelmicro.jwt.errors import (
    AccessDeniedError,
    AlgorithmNotAllowedError,
    BindingError,
    CertificateBindingError,
    ClaimsRejectedError,
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
    ExpiredTokenError,
    GuestRejectedError,
    InsufficientRoleError,
    InsufficientScopeError,
    InvalidAudienceError,
    InvalidClaimError,
    InvalidIssuerError,
    InvalidKeyError,
    InvalidSignatureError,
    InvalidTokenTypeError,
    JWTError,
    KeyPendingError,
    KeysUnavailableError,
    MalformedTokenError,
    MissingClaimError,
    TenantRejectedError,
    TenantUnavailableError,
    TokenIssuedInFutureError,
    TokenNotYetValidError,
    TokenRejectedError,
    TokenTooLargeError,
    TokenTooOldError,
    UncheckedBindingError,
    UnknownKeyError,
    UnsupportedTokenError,
    WeakKeyError,
)

__all__ = [
    "AccessDeniedError",
    "AlgorithmNotAllowedError",
    "BindingError",
    "CacheInfo",
    "CertificateBindingError",
    "Claims",
    "ClaimsRejectedError",
    "ConfigurationError",
    "DPoPBindingError",
    "DPoPNonces",
    "DPoPProofError",
    "DPoPReplayError",
    "DPoPVerifier",
    "ExpiredTokenError",
    "FetchOptions",
    "GuestRejectedError",
    "InsufficientRoleError",
    "InsufficientScopeError",
    "InvalidAudienceError",
    "InvalidClaimError",
    "InvalidIssuerError",
    "InvalidKeyError",
    "InvalidSignatureError",
    "InvalidTokenTypeError",
    "Issuer",
    "IssuerSettings",
    "JWTConfig",
    "JWTError",
    "JWTSettings",
    "JWTVerifier",
    "Key",
    "KeyPendingError",
    "KeySourceHealth",
    "KeysUnavailableError",
    "MalformedTokenError",
    "MissingClaimError",
    "RedisReplayStore",
    "ReplayBackend",
    "ReplayStore",
    "TenantLookupHealth",
    "TenantRejectedError",
    "TenantUnavailableError",
    "TokenIssuedInFutureError",
    "TokenNotYetValidError",
    "TokenRejectedError",
    "TokenTooLargeError",
    "TokenTooOldError",
    "UncheckedBindingError",
    "UnknownKeyError",
    "UnsupportedTokenError",
    "VerifyFunction",
    "WeakKeyError",
    "access_token_profile",
    "jwk_thumbprint",
    "require_roles",
    "require_scopes",
    "require_tenant",
    "unverified_header",
]


def unverified_header(token: str | bytes) -> dict[str, object]:
    """The decoded JOSE header of ``token`` WITHOUT verifying anything.

    For diagnostics and routing only; never trust what it returns.

    Raises:
        MalformedTokenError: the token is not a compact JWS with a valid header.
    """
    from grelmicro.jwt import _core  # noqa: PLC0415

    return _core.call(_unverified_header, token)
