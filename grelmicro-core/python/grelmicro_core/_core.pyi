"""Type stub of the compiled module ``grelmicro_core._core``.

Only the API is declared: the methods whose names start with an underscore
(``TokenCache._entry``, ``_keys``, ``_order_length``,
``VerifyCall._view_len``) are hooks for the test suite, not part of it, and
exist only in a core built with the ``test-hooks`` cargo feature (never a
released wheel). Being private names, stubtest leaves them out either way.
"""

from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any, final

__all__ = [
    "PGO",
    "SOURCE_HASH",
    "CoreError",
    "Key",
    "KeySet",
    "Policy",
    "ProofVerifier",
    "TokenCache",
    "Verifier",
    "VerifyCall",
    "__version__",
    "algorithms",
    "error_kinds",
    "jwk_thumbprint",
    "normalize_htu",
    "sha256_digest",
    "skip_codes",
    "unverified_header",
    "unverified_issuer",
]

__version__: str
SOURCE_HASH: str
#: "trained" (a profile-guided build), "instrumented" or "off".
PGO: str

class CoreError(Exception):
    """Every refusal of the core; ``args`` is ``(kind, message)``.

    ``context`` holds the refusal's structured context (times as floats,
    ``expected`` issuers/audiences as a tuple, the ``claim`` at fault, the
    token's ``kid`` capped at 128 bytes), or ``None``.
    """

    context: dict[str, float | str | tuple[str, ...]] | None

@final
class Key:
    """A verification key bound to one algorithm."""

    @staticmethod
    def secret(secret: str | bytes, algorithm: str, kid: str | None = None) -> Key:
        """An HMAC secret (HS256/384/512), at least as long as the hash output."""
    @staticmethod
    def pem(data: str | bytes, algorithm: str, kid: str | None = None) -> Key:
        """A public key in PEM (SPKI, ML-DSA SPKI included; PKCS#1 RSA or X.509 certificate)."""
    @staticmethod
    def jwk(
        document: str | bytes,
        algorithm: str | None = None,
        *,
        allow_symmetric: bool = False,
    ) -> Key:
        """One JWK given as JSON text (``AKP``: ML-DSA, its ``alg`` required)."""
    @property
    def algorithm(self) -> str: ...
    @property
    def algorithms(self) -> list[str]:
        """Every algorithm the key can verify (a JWK without ``alg``: its family)."""
    @property
    def padded(self) -> bool:
        """Whether EC coordinates shorter than the curve size were left-padded."""
    @property
    def kid(self) -> str | None: ...
    @property
    def kty(self) -> str: ...
    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 over the algorithm and key bytes (safe to log)."""

@final
class KeySet:
    """An immutable set of keys with the selection rule by ``kid`` and ``alg``."""

    def __new__(cls, keys: Sequence[Key]) -> KeySet: ...
    @staticmethod
    def from_jwks(
        document: str | bytes,
        *,
        allow_symmetric: bool = False,
        max_keys: int = ...,
    ) -> KeySet:
        """A JWKS document (JSON text); unusable keys are skipped.

        Also the X.509 form (an object of ``kid`` to PEM certificate, as
        Google and Firebase publish): each certificate's key, RS256 for RSA.
        """
    @property
    def skipped(self) -> list[tuple[str | None, str, str]]:
        """``(kid, code, reason)`` for every key that was left out.

        ``code`` is stable kebab-case (one of :func:`skip_codes`), for
        programs to act on; ``reason`` is for people and may change.
        """
    @property
    def keys(self) -> list[Key]: ...
    def __len__(self) -> int: ...

@final
class Policy:
    """A validated verification policy.

    The keywords are the core's policy options (``audience``, ``issuer``,
    ``algorithms``, ``leeway``, ``leeway_ahead``, ``required``, ``typ``, ``max_age``,
    ``max_token_size``, ``max_depth``, ...): the core owns their list, their
    defaults and their ranges, and ``grelmicro.jwt.JWTConfig`` gives them
    their Python types. An unknown keyword is a ``TypeError``; a value out of
    range a ``CoreError`` of kind ``invalid-config`` naming the field.
    """

    def __new__(cls, **options: object) -> Policy: ...
    @property
    def max_token_size(self) -> int: ...
    @property
    def leeway(self) -> float: ...
    @property
    def leeway_ahead(self) -> float:
        """The tolerance on ``nbf`` and ``iat`` ahead of now: max(leeway, leeway_ahead)."""

@final
class Verifier:
    """Keys plus policy; ``verify(token, now)`` does the whole check in one call."""

    def __new__(cls, keys: KeySet, policy: Policy) -> Verifier: ...
    def verify(self, token: str | bytes, now: float) -> MappingProxyType[str, Any]:
        """Verifies ``token`` at ``now`` and returns the payload, read-only.

        Objects (the top level too) are read-only mapping proxies and arrays
        tuples: a cached payload is shared between requests and threads.
        """
    def verify_until(
        self, token: str | bytes, now: float
    ) -> tuple[MappingProxyType[str, Any], float | None]:
        """``verify``, and until when its answer holds: ``(payload, valid_until)``.

        ``valid_until`` is the earliest of ``exp`` and, under ``max_age``,
        ``iat + max_age`` (leeway never extends it); None without ``exp``.
        """
    def keeps_cache_of(self, old: Verifier) -> bool:
        """Whether results ``old`` verified still hold under this verifier's keys.

        No key of ``old`` is gone and no token selects another key than it
        did under ``old`` (the policy is taken to be the same).
        """
    @property
    def algorithms(self) -> list[str]:
        """Algorithms this verifier accepts."""

@final
class TokenCache:
    """The verified-token cache, keyed by the token's SHA-256 digest or the token itself.

    ``verify(token, now)`` is the whole request in one call: a hit returns the
    stored claims; a miss calls ``verify`` (an engine's ``verify_until``,
    returning ``(payload, valid_until)``) and ``claims`` (given when built),
    stores the result until ``valid_until`` or the TTL, whichever is first,
    and returns it.
    """

    def __new__(
        cls,
        max_size: int,
        *,
        digest_key: bool,
        max_token_size: int,
        ttl: float,
        verify: Callable[[str | bytes, float], tuple[Any, float | None]] | None = None,
        claims: Callable[[Any], Any] | None = None,
        claims_slot: str | None = None,
        clock: Callable[[], float] | None = None,
        count: bool = False,
    ) -> TokenCache: ...
    def rebind(
        self, verify: Callable[[str | bytes, float], tuple[Any, float | None]]
    ) -> TokenCache:
        """A cache sharing this one's entries and counts, whose misses call ``verify``."""
    def verify(self, token: str | bytes, now: float | None = None) -> Any:
        """The claims for ``token`` at ``now`` (default: ``clock()``): cached, else verified."""
    def get(self, token: str | bytes, now: float) -> Any:
        """The value stored for ``token`` if ``stored_at <= now < deadline``, else None."""
    def store(
        self, token: str | bytes, value: Any, payload: Any, valid_until: float | None, now: float
    ) -> None:
        """Remembers ``value``, verified from ``payload``, until ``valid_until`` or the TTL."""
    def clear(self) -> None:
        """Drops every entry."""
    @property
    def counts(self) -> tuple[int, int] | None:
        """``(hits, misses)`` of ``verify`` when built with ``count=True``, else None."""
    @property
    def max_size(self) -> int:
        """The bound on the number of entries."""
    def __len__(self) -> int: ...

@final
class VerifyCall:
    """A verifier's ``verify(token, /, *, now=None)``: one call per request.

    Keeps, per thread, a reference to the installed route (a ``TokenCache``
    with its engine) and a view of its entries, so a hit touches no lock and
    no object another thread writes. ``refuse(error, now)`` raises what a
    failure becomes; ``install(route)`` swaps the route for every thread.
    """

    def __new__(
        cls,
        route: TokenCache,
        *,
        clock: Callable[[], float],
        refuse: Callable[[BaseException, object], Any],
        signature: Any,
    ) -> VerifyCall: ...
    def __call__(self, token: str | bytes, /, *, now: float | None = None) -> Any:
        """Verify ``token`` and return its claims."""
    def install(self, route: TokenCache) -> None:
        """Makes ``route`` the one every later call uses (from any thread)."""
    @property
    def __signature__(self) -> Any:
        """The signature frameworks see (``inspect.signature`` reads it)."""

@final
class ProofVerifier:
    """The rules a DPoP proof (RFC 9449) is checked against; one call per proof.

    Refusals are ``CoreError("dpop-proof" | "dpop-binding", message)`` whose
    ``context`` is ``{"check": <rule>}`` (``structure``, ``typ``, ``alg``,
    ``jwk``, ``signature``, ``jti``, ``htm``, ``htu``, ``iat``, ``ath``,
    ``nonce``, ``jkt``).
    """

    def __new__(
        cls,
        *,
        algorithms: Sequence[str] | None = None,
        max_age: float = ...,
        leeway: float = ...,
        max_size: int = ...,
        max_depth: int = ...,
    ) -> ProofVerifier: ...
    def verify(
        self,
        proof: str | bytes,
        method: str,
        uri: str,
        access_token: str | bytes,
        jkt: str,
        now: float,
    ) -> tuple[bytes, float, str | None]:
        """Check one proof; ``(replay_key, iat, nonce)`` when it is accepted."""
    @property
    def algorithms(self) -> list[str]:
        """Algorithms proofs may be signed with (public-key ones only; ML-DSA only when named)."""
    @property
    def max_age(self) -> float: ...
    @property
    def leeway(self) -> float: ...

def jwk_thumbprint(document: str | bytes) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK given as JSON text (RSA, EC, OKP, AKP)."""

def normalize_htu(uri: str) -> str | None:
    """``uri`` as RFC 9449 compares ``htu``; ``None`` if not an absolute http(s) URI."""

def sha256_digest(data: str | bytes) -> bytes:
    """The raw 32-byte SHA-256 digest of ``data``."""

def unverified_header(token: str | bytes, *, max_token_size: int = ...) -> dict[str, Any]:
    """The decoded header of a token, WITHOUT any verification."""

def unverified_issuer(token: str | bytes, max_token_size: int = ...) -> str | None:
    """The token's ``iss`` WITHOUT verification (``None`` if absent or not a string)."""

def error_kinds() -> list[str]:
    """Every error kind the core can raise."""

def algorithms() -> list[str]:
    """Every algorithm name the core knows."""

def skip_codes() -> list[str]:
    """Every code a key set names a skipped key with (``KeySet.skipped``)."""
