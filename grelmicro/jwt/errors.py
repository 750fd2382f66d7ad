"""The error taxonomy of ``grelmicro.jwt``.

Every error derives from :class:`JWTError`. A refused token raises a
:class:`TokenRejectedError` subclass whose ``reason`` is a stable kebab-case
string; catch the base class to answer 401, or a subclass to treat one family
differently. Messages never contain token bytes, signatures or key material.

Rejections carry structured context as attributes, so callers never parse
messages: :class:`ExpiredTokenError` has ``expires_at``, ``now`` and
``leeway``; :class:`InvalidIssuerError` and :class:`InvalidAudienceError`
have the ``expected`` values (configuration, safe to show);
:class:`UnknownKeyError` has the token's ``kid``. Values taken from the
token are attributes only, capped in length and escaped, never part of a
message.

HTTP answers, as a service guarded by the verifier should give them:

- :class:`TokenRejectedError` and subclasses: 401 with
  ``WWW-Authenticate: Bearer error="invalid_token"`` (RFC 6750 §3.1).
- :class:`KeysUnavailableError`: 503; the client is not at fault.
- :class:`ConfigurationError` and subclasses: raised while building, never
  while serving; a service that hits one must not start.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import ClassVar

__all__ = [
    "REASONS",
    "AlgorithmNotAllowedError",
    "ClaimsRejectedError",
    "ConfigurationError",
    "DPoPBindingError",
    "DPoPProofError",
    "DPoPReplayError",
    "ExpiredTokenError",
    "InvalidAudienceError",
    "InvalidClaimError",
    "InvalidIssuerError",
    "InvalidKeyError",
    "InvalidSignatureError",
    "InvalidTokenTypeError",
    "JWTError",
    "KeysUnavailableError",
    "MalformedTokenError",
    "MissingClaimError",
    "TokenIssuedInFutureError",
    "TokenNotYetValidError",
    "TokenRejectedError",
    "TokenTooLargeError",
    "TokenTooOldError",
    "UnknownKeyError",
    "UnsupportedTokenError",
    "WeakKeyError",
]


class JWTError(Exception):
    """Base class of every error raised by ``grelmicro.jwt``.

    Its HTTP answer depends on the subclass: 401 for a refused token, 503 when
    keys are unavailable, none for configuration errors (raised at build time).
    """

    reason: ClassVar[str] = "error"

    @property
    def message(self) -> str:
        """The human-readable message (never token or key material)."""
        return str(self.args[0]) if self.args else ""


class TokenRejectedError(JWTError):
    """The token was refused. HTTP answer: 401, ``error="invalid_token"``."""

    reason: ClassVar[str] = "rejected"


class MalformedTokenError(TokenRejectedError):
    """Not a compact JWS: segments, base64url, JSON or header shape. HTTP 401."""

    reason = "malformed"


class TokenTooLargeError(TokenRejectedError):
    """Over the configured size or JSON nesting depth. HTTP 401."""

    reason = "too-large"


class UnsupportedTokenError(TokenRejectedError):
    """Uses a JWS feature this verifier refuses (JWE, ``crit``, ``b64``). HTTP 401."""

    reason = "unsupported"


class AlgorithmNotAllowedError(TokenRejectedError):
    """``alg`` missing, unknown, not allowed or not the key's own. HTTP 401."""

    reason = "algorithm"


class UnknownKeyError(TokenRejectedError):
    """No configured key (or more than one) could verify the token. HTTP 401.

    ``kid`` is the token's ``kid`` when it named one: taken from the token,
    so capped at 128 characters and escaped (non-ASCII and control
    characters as Python escape sequences); it never appears in the message.
    """

    reason = "unknown-key"

    kid: str | None = None
    """The ``kid`` the token named (capped, escaped), or ``None``."""


class InvalidSignatureError(TokenRejectedError):
    """The signature does not verify. HTTP 401."""

    reason = "signature"


class InvalidTokenTypeError(TokenRejectedError):
    """The ``typ`` header does not match the policy. HTTP 401."""

    reason = "type"


class ClaimsRejectedError(TokenRejectedError):
    """A registered claim failed the policy (base of the claim errors). HTTP 401."""

    reason = "claims"


class ExpiredTokenError(ClaimsRejectedError):
    """``exp`` has passed. HTTP 401.

    Attributes: ``expires_at``, ``now`` (aware UTC datetimes) and ``leeway``
    (a timedelta); ``None`` when a time cannot be shown as a datetime.
    """

    reason = "expired"

    expires_at: datetime | None = None
    """The token's ``exp``."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The configured clock-skew tolerance."""


class TokenNotYetValidError(ClaimsRejectedError):
    """``nbf`` is still ahead. HTTP 401. Attributes: ``not_before``, ``now``, ``leeway``."""

    reason = "not-yet-valid"

    not_before: datetime | None = None
    """The token's ``nbf``."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The configured clock-skew tolerance."""


class TokenIssuedInFutureError(ClaimsRejectedError):
    """``iat`` is in the future. HTTP 401. Attributes: ``issued_at``, ``now``, ``leeway``."""

    reason = "issued-in-future"

    issued_at: datetime | None = None
    """The token's ``iat``."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The configured clock-skew tolerance."""


class TokenTooOldError(ClaimsRejectedError):
    """Issued longer ago than the configured maximum age. HTTP 401.

    Attributes: ``issued_at``, ``max_age`` (a timedelta), ``now``, ``leeway``.
    """

    reason = "too-old"

    issued_at: datetime | None = None
    """The token's ``iat``."""
    max_age: timedelta | None = None
    """The configured maximum age."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The configured clock-skew tolerance."""


class InvalidAudienceError(ClaimsRejectedError):
    """``aud`` does not match, or is present with no audience configured. HTTP 401.

    ``expected`` holds the configured audiences (empty: none configured).
    """

    reason = "audience"

    expected: tuple[str, ...] = ()
    """The configured audiences."""


class InvalidIssuerError(ClaimsRejectedError):
    """``iss`` is not one of the configured issuers. HTTP 401.

    ``expected`` holds the configured issuers.
    """

    reason = "issuer"

    expected: tuple[str, ...] = ()
    """The configured issuers."""


class MissingClaimError(ClaimsRejectedError):
    """A required claim is absent. HTTP 401. ``claim`` names it."""

    reason = "missing-claim"

    claim: str | None = None
    """The required claim that is absent (from the configuration)."""


class InvalidClaimError(ClaimsRejectedError):
    """A registered claim has the wrong JSON type, or a number out of range. HTTP 401.

    ``claim`` names the registered claim when one is at fault (``None`` for
    a number out of range elsewhere in the payload).
    """

    reason = "invalid-claim"

    claim: str | None = None
    """The registered claim at fault, if any."""


class DPoPProofError(TokenRejectedError):
    """The DPoP proof (RFC 9449) was refused. HTTP 401, ``DPoP error="invalid_dpop_proof"``.

    ``check`` names the rule it broke: ``structure``, ``typ``, ``alg``,
    ``jwk``, ``signature``, ``jti``, ``htm``, ``htu``, ``iat``, ``ath``,
    ``nonce`` (also a missing or stale server nonce), ``missing`` (no
    ``DPoP`` header) or ``multiple`` (more than one).
    """

    reason = "dpop-proof"

    check: str | None = None
    """The rule the proof broke."""

    use_nonce: bool = False
    """The client must retry with the server's fresh ``DPoP-Nonce`` (``use_dpop_nonce``)."""


class DPoPReplayError(TokenRejectedError):
    """The DPoP proof was used before (its ``jti`` is remembered). HTTP 401.

    The challenge is ``WWW-Authenticate: DPoP error="invalid_dpop_proof"``.

    ``store_full`` is true when the proof could not be recorded because the
    replay store is full of live entries: the service answers 503 then (the
    client is not at fault, and no live entry is ever evicted to make room).
    """

    reason = "dpop-replay"

    store_full: bool = False
    """The proof was refused because the replay store is full (answer 503)."""


class DPoPBindingError(TokenRejectedError):
    """The access token and how it was presented do not fit. HTTP 401, ``error="invalid_token"``.

    A DPoP-bound token (``cnf.jkt``) sent as a plain bearer token, an
    unbound token sent with the ``DPoP`` scheme, a proof signed by another
    key than the one the token is bound to, or a scheme the policy refuses.
    """

    reason = "dpop-binding"

    check: str | None = None
    """What did not fit (``jkt``, ``bearer``, ``unbound``, ``scheme``)."""


class KeysUnavailableError(JWTError):
    """No usable verification keys right now. HTTP answer: 503, not 401.

    ``retry_after`` is the number of seconds until the key source may fetch
    again (the ``Retry-After`` of the 503), when known.
    """

    reason = "keys-unavailable"

    retry_after: float | None = None
    """Seconds until keys may be fetched again, or ``None`` if unknown."""


class ConfigurationError(JWTError, ValueError):
    """Invalid configuration, found while building. Never raised while serving."""

    reason = "invalid-config"


class InvalidKeyError(ConfigurationError):
    """A key could not be parsed or does not fit its algorithm (raised at build time)."""

    reason = "invalid-key"


class WeakKeyError(InvalidKeyError):
    """A key is too weak to trust: short HMAC secret, small RSA modulus (raised at build time)."""

    reason = "weak-key"


def _classes(base: type[JWTError]) -> list[type[JWTError]]:
    """``base`` and every class below it, parents first."""
    found = [base]
    for sub in base.__subclasses__():
        found.extend(_classes(sub))
    return found


#: Every stable ``reason`` to its class: the one table the code, the tests and
#: the documentation read (``reason`` of the base classes included: ``error``,
#: ``rejected``, ``claims``). Read-only.
REASONS: Mapping[str, type[JWTError]] = MappingProxyType(
    {cls.reason: cls for cls in _classes(JWTError)}
)
