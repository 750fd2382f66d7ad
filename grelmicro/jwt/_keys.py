"""Verification keys, as users build them."""

from __future__ import annotations

import difflib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._config import AlgorithmName, check_flags
from grelmicro.jwt.errors import ConfigurationError, InvalidKeyError

__all__ = ["Key"]  # key_identity: shared by _verifier and _issuers

_KNOWN = tuple(_core.algorithms())

logger = logging.getLogger("grelmicro.jwt")

#: Fingerprints of keys whose padded EC coordinates were already logged.
_PADDED_LOGGED: set[str] = set()
_PADDED_LOCK = threading.Lock()

_lifecycle.renew_lock_after_fork(globals(), "_PADDED_LOCK")  # a child's copy may be held
_PADDED_MAX = 4096


def note_padded(keys: Sequence[_core.Key], where: str) -> None:
    """Log once per key, at INFO, that its short EC coordinates were left-padded.

    Some libraries export coordinates without their leading zero bytes; the
    core pads them back to the curve size (the same integers). ``where``
    names the source (never key material).
    """
    for key in keys:
        if not key.padded:
            continue
        with _PADDED_LOCK:
            if key.fingerprint in _PADDED_LOGGED or len(_PADDED_LOGGED) >= _PADDED_MAX:
                continue
            _PADDED_LOGGED.add(key.fingerprint)
        logger.info(
            "%s: key %r has EC coordinates shorter than its curve size; "
            "left-padded with zeros (the same key)",
            where,
            key.kid,
            extra={"jwt_event": "keys.key_padded", "jwt_source": where, "jwt_kid": key.kid},
        )


def _check_names(algorithm: object, kid: object) -> None:
    if not isinstance(algorithm, str):
        raise ConfigurationError("algorithm must be a string such as 'RS256'")
    if algorithm not in _KNOWN:
        # The name is not echoed (a secret passed in the wrong place must not leak).
        close = difflib.get_close_matches(algorithm.upper(), [k.upper() for k in _KNOWN], n=1)
        hint = ""
        if close and len(algorithm) <= 16:
            name = _KNOWN[[k.upper() for k in _KNOWN].index(close[0])]
            hint = f" (names are case-sensitive; did you mean {name}?)"
        raise ConfigurationError(
            f"unknown or unsupported algorithm{hint}; expected one of {', '.join(_KNOWN)}"
        )
    if kid is not None and not isinstance(kid, str):
        raise ConfigurationError("kid must be a string or None")


def _not_a_path(data: object) -> None:
    if isinstance(data, os.PathLike):
        raise InvalidKeyError(
            "a file path was given, not PEM text: pass the file's contents "
            "(for example Path(path).read_bytes())"
        )


class Key:
    """One verification key, parsed once and bound to one algorithm.

    Build it with :meth:`secret`, :meth:`pem` or :meth:`jwk`; each refuses
    weak or mismatched keys at once with :class:`~grelmicro.jwt.InvalidKeyError`
    (or :class:`~grelmicro.jwt.WeakKeyError`). A key with a ``kid`` verifies
    tokens naming that ``kid``; a key without one verifies tokens whose
    ``alg`` it serves when it is the only such key. A token naming no ``kid``
    is verified only when exactly one configured key could verify it.
    """

    __slots__ = ("_inner",)

    _inner: _core.Key

    def __init__(self, core: _core.Key) -> None:
        object.__setattr__(self, "_inner", core)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Key is immutable")

    @classmethod
    def secret(
        cls,
        secret: str | bytes,
        algorithm: AlgorithmName = "HS256",
        *,
        kid: str | None = None,
    ) -> Key:
        """A shared HMAC secret, at least as long as the hash (32/48/64 bytes)."""
        _check_names(algorithm, kid)
        return cls(_core.call(_core.Key.secret, secret, algorithm, kid))

    @classmethod
    def pem(cls, data: str | bytes, algorithm: AlgorithmName, *, kid: str | None = None) -> Key:
        """A public key in PEM: SPKI, PKCS#1 RSA, or an X.509 certificate's key.

        Exactly one block, or several certificates of the same key. Common
        mistakes are named: a file path instead of its contents, escaped
        newlines (backslash-n) instead of line breaks, a private key, a
        certificate signing request.
        """
        _not_a_path(data)
        _check_names(algorithm, kid)
        return cls(_core.call(_core.Key.pem, data, algorithm, kid))

    @classmethod
    def jwk(
        cls,
        jwk: Mapping[str, Any] | str | bytes,
        algorithm: AlgorithmName | None = None,
        *,
        allow_symmetric: bool = False,
    ) -> Key:
        """One JWK (a mapping or its JSON text). ``oct`` keys need ``allow_symmetric``.

        The algorithm is the JWK's ``alg``, or ``algorithm`` (both must
        agree when both are given). A JWK naming neither is bound to its key
        type's family (:attr:`algorithms`), and the verifier's
        ``algorithms=`` choose within it: RSA keys verify RS256/384/512 and
        PS256/384/512, ``oct`` keys the HS* their length allows; without
        ``algorithms=`` such a key verifies RS256 (or HS256) only. EC and
        OKP keys verify their curve's one algorithm. EC coordinates shorter
        than the curve size are left-padded (logged once at INFO).
        """
        if algorithm is not None:
            _check_names(algorithm, None)
        check_flags(allow_symmetric=allow_symmetric)
        document = json_text(jwk, "JWK")
        core = _core.call(_core.Key.jwk, document, algorithm, allow_symmetric=allow_symmetric)
        note_padded([core], "JWK")
        return cls(core)

    @property
    def algorithm(self) -> str:
        """The algorithm this key verifies (a JWK without ``alg``: its family's default)."""
        return self._inner.algorithm

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Every algorithm the key can verify.

        One (two for Ed25519's names), unless the key came from a JWK
        without ``alg``: then its family, among which the verifier's
        ``algorithms=`` choose (without them, :attr:`algorithm` alone).
        """
        return tuple(self._inner.algorithms)

    @property
    def kid(self) -> str | None:
        """The key id, if any."""
        return self._inner.kid

    @property
    def kty(self) -> str:
        """``oct``, ``RSA``, ``EC``, ``OKP`` or ``AKP`` (ML-DSA)."""
        return self._inner.kty

    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 over algorithm and key bytes: safe to log, tells keys apart."""
        return self._inner.fingerprint

    def __repr__(self) -> str:
        kid = f", kid={self.kid!r}" if self.kid is not None else ""
        return f"Key(algorithm={self.algorithm!r}{kid}, kty={self.kty!r})"


def json_text(document: object, what: str) -> str | bytes:
    """The JSON text of a JWK or JWKS given as a mapping or as text."""
    if isinstance(document, (str, bytes)):
        return document
    if isinstance(document, Mapping):
        try:
            return json.dumps(dict(document))
        except (TypeError, ValueError):
            raise InvalidKeyError(f"{what} holds values that are not JSON") from None
    raise InvalidKeyError(f"a {what} must be a mapping or JSON text")


def key_identity(keys: Sequence[_core.Key]) -> frozenset[tuple[str, str | None]]:
    """What identifies a set of keys: each key's fingerprint with its ``kid``."""
    return frozenset((key.fingerprint, key.kid) for key in keys)
