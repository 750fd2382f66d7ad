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
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import ClassVar, Literal

__all__ = [
    "REASONS",
    "AccessDeniedError",
    "AlgorithmNotAllowedError",
    "BindingError",
    "CertificateBindingError",
    "ClaimsRejectedError",
    "ConfigurationError",
    "DPoPBindingError",
    "DPoPProofError",
    "DPoPReplayError",
    "ExpiredTokenError",
    "GuestRejectedError",
    "InsufficientRoleError",
    "InsufficientScopeError",
    "InvalidAudienceError",
    "InvalidClaimError",
    "InvalidIssuerError",
    "InvalidKeyError",
    "InvalidSignatureError",
    "InvalidTokenTypeError",
    "JWTError",
    "KeyPendingError",
    "KeysUnavailableError",
    "MalformedTokenError",
    "MissingClaimError",
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
    "WeakKeyError",
]


class JWTError(Exception):
    """Base class of every error raised by ``grelmicro.jwt``.

    Its HTTP answer depends on the subclass: 401 for a refused token, 503 when
    keys are unavailable, none for configuration errors (raised at build time).
    """

    reason: ClassVar[str] = "error"
    detail: ClassVar[str] = "The request was refused."

    @property
    def message(self) -> str:
        """The human-readable message (never token or key material)."""
        return str(self.args[0]) if self.args else ""


class TokenRejectedError(JWTError):
    """The token was refused. HTTP answer: 401, ``error="invalid_token"``."""

    reason: ClassVar[str] = "rejected"
    detail = "The token was refused."


class MalformedTokenError(TokenRejectedError):
    """Not a compact JWS: segments, base64url, JSON or header shape. HTTP 401."""

    reason = "malformed"
    detail = "The token is not a well-formed compact JWS."


class TokenTooLargeError(TokenRejectedError):
    """Over the configured size or JSON nesting depth. HTTP 401."""

    reason = "too-large"
    detail = "The token is too large."


class UnsupportedTokenError(TokenRejectedError):
    """Uses a JWS feature this verifier refuses (JWE, ``crit``, ``b64``). HTTP 401."""

    reason = "unsupported"
    detail = "The token uses a JOSE feature this service does not accept."


class AlgorithmNotAllowedError(TokenRejectedError):
    """``alg`` missing, unknown, not allowed or not the key's own. HTTP 401.

    ``refused_by`` says who refused a supported algorithm: ``"policy"``
    (not in the verifier's ``algorithms``, or a post-quantum one not named
    there: no key can change that) or ``"keys"`` (allowed, but no key held
    serves it, or the key the token's ``kid`` names does not); ``None`` when
    ``alg`` is missing or not a supported algorithm at all. ``algorithm`` is
    the token's ``alg``: a supported name as is (the message names it too),
    anything else capped at 128 characters and escaped, never in the
    message. ``kid`` is set on a keys' refusal when the token's ``kid``
    names a key held: no key published later changes what that ``kid``
    names, so fetching keys again cannot help.
    """

    reason = "algorithm"
    detail = "The token's algorithm is not accepted."

    refused_by: Literal["policy", "keys"] | None = None
    """Who refused a supported ``alg``: the policy or the keys held."""
    algorithm: str | None = None
    """The token's ``alg`` (escaped and capped unless a supported name), or ``None``."""
    kid: str | None = None
    """The token's ``kid`` when it names a key held that does not serve its ``alg``."""


class UnknownKeyError(TokenRejectedError):
    """No configured key (or more than one) could verify the token. HTTP 401.

    ``kid`` is the token's ``kid`` when it named one: taken from the token,
    so capped at 128 characters and escaped (non-ASCII and control
    characters as Python escape sequences); it never appears in the message.
    """

    reason = "unknown-key"
    detail = "The token was not signed by a known key."

    kid: str | None = None
    """The ``kid`` the token named (capped, escaped), or ``None``."""


class InvalidSignatureError(TokenRejectedError):
    """The signature does not verify. HTTP 401."""

    reason = "signature"
    detail = "The token's signature does not verify."


class InvalidTokenTypeError(TokenRejectedError):
    """The ``typ`` header does not match the policy. HTTP 401."""

    reason = "type"
    detail = "The token's type is not accepted."


class ClaimsRejectedError(TokenRejectedError):
    """A registered claim failed the policy (base of the claim errors). HTTP 401."""

    reason = "claims"


class ExpiredTokenError(ClaimsRejectedError):
    """``exp`` has passed. HTTP 401.

    Attributes: ``expires_at`` (always set), ``now`` (aware UTC datetimes)
    and ``leeway`` (a timedelta); ``now`` and ``leeway`` are ``None`` when a
    time cannot be shown as a datetime.
    """

    reason = "expired"
    detail = "The token has expired."

    expires_at: datetime = datetime.min.replace(tzinfo=timezone.utc)
    """The token's ``exp`` (aware, UTC). An ``exp`` beyond what a datetime
    holds (before year 1) is the nearest end of ``datetime``'s range, so it
    is never ``None``."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The configured clock-skew tolerance."""


class TokenNotYetValidError(ClaimsRejectedError):
    """``nbf`` is still ahead. HTTP 401. Attributes: ``not_before``, ``now``, ``leeway``."""

    reason = "not-yet-valid"
    detail = "The token is not valid yet."

    not_before: datetime | None = None
    """The token's ``nbf``."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The tolerance applied ahead of now: the larger of ``leeway`` and ``leeway_ahead``."""


class TokenIssuedInFutureError(ClaimsRejectedError):
    """``iat`` is in the future. HTTP 401. Attributes: ``issued_at``, ``now``, ``leeway``."""

    reason = "issued-in-future"
    detail = "The token claims to be issued in the future."

    issued_at: datetime | None = None
    """The token's ``iat``."""
    now: datetime | None = None
    """The time the token was checked against (aware, UTC)."""
    leeway: timedelta | None = None
    """The tolerance applied ahead of now: the larger of ``leeway`` and ``leeway_ahead``."""


class TokenTooOldError(ClaimsRejectedError):
    """Issued longer ago than the configured maximum age. HTTP 401.

    Attributes: ``issued_at``, ``max_age`` (a timedelta), ``now``, ``leeway``.
    """

    reason = "too-old"
    detail = "The token is older than this service accepts."

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
    detail = "The token is not meant for this service."

    expected: tuple[str, ...] = ()
    """The configured audiences."""


class InvalidIssuerError(ClaimsRejectedError):
    """``iss`` is not one of the configured issuers. HTTP 401.

    ``expected`` holds the configured issuers.
    """

    reason = "issuer"
    detail = "The token's issuer is not trusted by this service."

    expected: tuple[str, ...] = ()
    """The configured issuers."""


class TenantRejectedError(ClaimsRejectedError):
    """A multi-tenant issuer's token whose tenant is refused. HTTP 401.

    The token's tenant claim (``tid`` by default) is absent, not a string,
    not the tenant its ``iss`` names, or not a tenant this service allows.
    The message shows the token's values escaped and capped, nothing more.
    """

    reason = "tenant"
    detail = "The token's tenant is not accepted by this service."


class GuestRejectedError(ClaimsRejectedError):
    """A guest's token, from an issuer configured with ``guests="refuse"``. HTTP 403.

    The token verified, but its user is a guest of the tenant (Entra ID:
    ``acct`` is 1, or ``idp`` names another issuer than ``iss``); the
    FastAPI dependency answers 403 ``insufficient_scope``, not 401: a new
    token of the same user would be refused the same way.
    """

    reason = "guest"
    detail = "Guest users are not accepted by this service."


class MissingClaimError(ClaimsRejectedError):
    """A required claim is absent. HTTP 401. ``claim`` names it."""

    reason = "missing-claim"
    detail = "The token lacks a required claim."

    claim: str | None = None
    """The required claim that is absent (from the configuration)."""


class InvalidClaimError(ClaimsRejectedError):
    """A registered claim has the wrong JSON type, or a number out of range. HTTP 401.

    ``claim`` names the registered claim when one is at fault (``None`` for
    a number out of range elsewhere in the payload).
    """

    reason = "invalid-claim"
    detail = "A claim of the token has the wrong type or value."

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
    detail = "The DPoP proof was refused."

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
    ``over_quota`` is true when the proof's key alone has too many live
    proofs: only that client is refused, with 429 (it is sending too fast).
    ``unavailable`` is true when a shared replay store cannot be reached:
    503, the proof is not accepted. ``retry_after`` is the real time until
    room frees, when known.
    """

    reason = "dpop-replay"
    detail = "The DPoP proof was used before."

    store_full: bool = False
    """The proof was refused because the replay store is full (answer 503)."""

    over_quota: bool = False
    """The proof's key holds its share of live proofs already (answer 429, ``Retry-After``)."""

    unavailable: bool = False
    """The replay store could not be reached (a shared store that is down): the
    proof can be neither accepted nor called a replay (answer 503)."""

    retry_after: float | None = None
    """Seconds until the store has room for this proof (its key's oldest entry
    expires when ``over_quota``, the store's oldest when ``store_full``);
    ``None`` when not known."""


class BindingError(TokenRejectedError):
    """The token's confirmation (``cnf``, RFC 7800) is malformed or not met. HTTP 401.

    The base of the sender-constraint refusals; raised itself for a ``cnf``
    claim that cannot be read (not an object, no method in it, a method's
    value of the wrong shape). ``check`` names what failed; ``method`` the
    confirmation method at fault (``jkt``, ``x5t#S256``, ...) when one is.
    """

    reason = "binding"
    detail = "The token's confirmation claim (cnf) cannot be read."

    check: str | None = None
    """What failed (``cnf``, ``jkt``, ``x5t#S256``, ...)."""

    method: str | None = None
    """The confirmation method at fault, if any (escaped, capped)."""


class DPoPBindingError(BindingError):
    """The access token and how it was presented do not fit. HTTP 401, ``error="invalid_token"``.

    A DPoP-bound token (``cnf.jkt``) sent as a plain bearer token, an
    unbound token sent with the ``DPoP`` scheme, a proof signed by another
    key than the one the token is bound to, or a scheme the policy refuses.
    """

    reason = "dpop-binding"
    detail = "The access token is not presented with the key it is bound to."

    check: str | None = None
    """What did not fit (``jkt``, ``bearer``, ``unbound``, ``scheme``)."""


class UncheckedBindingError(BindingError):
    """The token is bound by a confirmation method this service does not check. HTTP 401.

    A token whose ``cnf`` names a method (``x5t#S256``, ``jwk``, ``kid``, ...)
    that no binding of the route verifies is refused: accepting it as a plain
    bearer token would let a stolen sender-constrained token replay.
    ``method`` names the first unchecked method.
    """

    reason = "unchecked-binding"
    detail = "The token is bound by a confirmation method this service does not check."


class CertificateBindingError(BindingError):
    """A certificate-bound token (RFC 8705 ``cnf.x5t#S256``) without its certificate. HTTP 401.

    The request presented no client certificate, or one whose SHA-256
    thumbprint is not the token's ``x5t#S256``.
    """

    reason = "certificate-binding"
    detail = "The token is bound to a client certificate the request did not present."


class AccessDeniedError(JWTError):
    """The token verified but does not grant what the route needs. HTTP answer: 403.

    ``missing`` lists what was required and not granted (names from the
    route's configuration, never from the token).
    """

    reason = "access-denied"
    detail = "The token does not grant access to this resource."

    missing: tuple[str, ...] = ()
    """What the route required and the token did not grant."""

    required: tuple[str, ...] = ()
    """Everything the route required (RFC 6750's ``scope`` attribute names them all)."""


class InsufficientScopeError(AccessDeniedError):
    """A required scope is not granted. HTTP 403, ``error="insufficient_scope"`` (RFC 6750)."""

    reason = "insufficient-scope"
    detail = "The token lacks a required scope"


class InsufficientRoleError(AccessDeniedError):
    """A required role is not granted (read from the configured claim paths). HTTP 403."""

    reason = "insufficient-role"
    detail = "The token lacks a required role"


class KeysUnavailableError(JWTError):
    """No usable verification keys right now. HTTP answer: 503, not 401.

    ``retry_after`` is the number of seconds until the key source may fetch
    again (the ``Retry-After`` of the 503), when known.
    """

    reason = "keys-unavailable"
    detail = "The keys to verify tokens are unavailable; try again later."

    retry_after: float | None = None
    """Seconds until keys may be fetched again, or ``None`` if unknown."""

    wait: str | None = None
    """What the answer waits for: ``fetch-in-flight``, ``budget`` (unknown-kid
    fetches are paced), ``backoff``, ``provider-failing``, ``config`` (a
    configuration error keeps keys from loading) or ``closed``; ``None`` if
    unknown."""


class KeyPendingError(KeysUnavailableError):
    """A token names a key not seen yet, and the keys are refetched shortly. HTTP: 503.

    Keys are held and the provider answers: this token waits for the next
    paced refetch (``retry_after``). Dashboards tell it from an outage by
    its reason: invented ``kid`` values produce ``key-pending``, never
    ``keys-unavailable``.
    """

    reason = "key-pending"
    detail = "The token names a key not seen yet; try again shortly."


class TenantUnavailableError(KeysUnavailableError):
    """Whether the token's tenant is accepted could not be decided now. HTTP answer: 503.

    The ``tenants=`` callable of an issuer template has not answered within
    the wait (``wait`` ``tenant-lookup``), failed or took longer than its
    bound (``tenant-lookup-failed``), or too many lookups run at once
    (``tenant-lookups-busy``). The identity provider is not at fault: the
    application's own tenant directory is.
    """

    reason = "tenant-unavailable"
    detail = "Whether the token's tenant is accepted could not be decided; try again shortly."


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
