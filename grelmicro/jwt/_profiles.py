"""Token profiles: presets of :class:`JWTConfig` for standard token formats.

:func:`access_token_profile` is the JWT profile for OAuth 2.0 access tokens
(RFC 9068): the ``typ`` header must be ``at+jwt`` (``application/at+jwt``
too, compared as a media type), and ``iss``, ``exp``, ``aud``, ``sub``,
``client_id``, ``iat`` and ``jti`` must all be present; the audience check
is mandatory (RFC 9068 §4: a resource server refuses tokens not meant for
it).
"""

from __future__ import annotations

from collections.abc import Sequence

from grelmicro.jwt._config import JWTConfig
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["ACCESS_TOKEN_CLAIMS", "access_token_profile"]

#: Claims every RFC 9068 access token carries (RFC 9068 §2.2).
ACCESS_TOKEN_CLAIMS = ("iss", "exp", "aud", "sub", "client_id", "iat", "jti")


def _names(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(f"{what} must be a string or a sequence of strings")
    return tuple(value)


def access_token_profile(
    *,
    audience: str | Sequence[str],
    issuer: str | Sequence[str] | None = None,
    required: Sequence[str] = (),
    **settings: object,
) -> JWTConfig:
    """A :class:`JWTConfig` for RFC 9068 access tokens.

    Use it as ``JWTVerifier(jwks_url=..., config=access_token_profile(
    audience="https://api.example.com", issuer="https://idp.example.com/"))``.

    Args:
        audience: this resource server's identifier(s); mandatory.
        issuer: the authorization server's issuer identifier(s); RFC 9068
            asks for an exact match, so give it unless the key source
            (``discover=``, ``issuers=``) binds the issuer already.
        required: claims required on top of the profile's.
        **settings: any other :class:`JWTConfig` setting (``leeway``,
            ``algorithms``, cache settings, ...). ``typ`` and
            ``require_exp`` are the profile's and cannot be changed.

    Raises:
        ConfigurationError: no audience, or a setting the profile fixes.
    """
    audiences = _names(audience, "audience")
    if not audiences or not all(audiences):
        raise ConfigurationError(
            "the RFC 9068 access-token profile needs the resource server's audience"
        )
    fixed = sorted({"typ", "require_exp"} & set(settings))
    if fixed:
        raise ConfigurationError(
            "the RFC 9068 access-token profile fixes " + ", ".join(fixed) + "; leave it out"
        )
    extra = tuple(name for name in _names(required, "required") if name not in ACCESS_TOKEN_CLAIMS)
    return JWTConfig.build(
        audience=audiences,
        issuer=_names(issuer, "issuer"),
        typ="at+jwt",
        require_exp=True,
        required=ACCESS_TOKEN_CLAIMS + extra,
        **settings,
    )
