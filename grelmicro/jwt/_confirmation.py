"""The one reader of a token's confirmation claim (``cnf``, RFC 7800).

A sender-constrained token names, in ``cnf``, what its holder must also
prove: ``jkt`` (RFC 9449 DPoP: the thumbprint of the proof key) or
``x5t#S256`` (RFC 8705 mutual TLS: the SHA-256 thumbprint of the client
certificate). :func:`confirmation` reads ``cnf`` into a :class:`Confirmation`
and refuses what cannot be read; the checks that enforce each method (the
DPoP proof, the client certificate) read it from here, and whatever reads a
token for a route refuses the methods it has no check for
(:meth:`Confirmation.unchecked`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from grelmicro.jwt.errors import BindingError, UncheckedBindingError

__all__ = ["JKT", "METHODS", "X5T_S256", "Confirmation", "confirmation"]

#: RFC 9449 §6.1: the JWK SHA-256 thumbprint of the DPoP proof key.
JKT = "jkt"
#: RFC 8705 §3.1: the SHA-256 thumbprint of the client certificate (base64url).
X5T_S256 = "x5t#S256"
#: The methods this package can check.
METHODS = (JKT, X5T_S256)

#: A base64url SHA-256 digest without padding: 43 characters.
_THUMBPRINT = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True, slots=True)
class Confirmation:
    """What a token's ``cnf`` asks the holder to prove.

    ``jkt`` and ``x5t_s256`` are the values of the methods this package
    checks (``None`` when absent); ``others`` names any other method present
    (``jwk``, ``kid``, ``jwe``, ...: escaped and capped, for messages).
    """

    jkt: str | None = None
    x5t_s256: str | None = None
    others: tuple[str, ...] = ()

    @property
    def methods(self) -> tuple[str, ...]:
        """Every method ``cnf`` names, the checkable ones first."""
        known = tuple(
            name
            for name, value in ((JKT, self.jkt), (X5T_S256, self.x5t_s256))
            if value is not None
        )
        return known + self.others

    def unchecked(self, checked: Collection[str]) -> UncheckedBindingError | None:
        """The refusal for a method not in ``checked``, ``None`` when all are checked."""
        for method in self.methods:
            if method not in checked:
                error = UncheckedBindingError(
                    f"the token is bound by cnf method {method!r}, which this service does "
                    "not check; it cannot be used as a bearer token"
                )
                error.check = "unchecked"
                error.method = method
                return error
        return None


#: An unbound token: no ``cnf``.
UNBOUND = Confirmation()


def _refused(check: str, message: str) -> BindingError:
    error = BindingError(message)
    error.check = check
    error.method = check if check in METHODS else None
    return error


def _name(member: object) -> str:
    """A ``cnf`` member name as it may appear in messages: escaped, capped."""
    return ascii(str(member))[1:-1][:32]


def confirmation(claims: Mapping[str, Any]) -> Confirmation:
    """Read ``cnf`` of verified claims.

    Raises:
        BindingError: ``cnf`` is present but not an object, names no method,
            or ``jkt``/``x5t#S256`` is not a thumbprint string.
    """
    cnf = claims.get("cnf")
    if cnf is None:
        return UNBOUND
    if not isinstance(cnf, Mapping):
        raise _refused("cnf", "the access token's cnf claim is not an object")
    jkt = cnf.get(JKT)
    if jkt is not None and (not isinstance(jkt, str) or not jkt):
        raise _refused(JKT, "the access token's cnf.jkt is not a thumbprint string")
    x5t = cnf.get(X5T_S256)
    if x5t is not None and (not isinstance(x5t, str) or not _THUMBPRINT.fullmatch(x5t)):
        raise _refused(X5T_S256, "the access token's cnf.x5t#S256 is not a SHA-256 thumbprint")
    others = tuple(_name(name) for name in cnf if name not in METHODS)
    if jkt is None and x5t is None and not others:
        # ``{}`` or ``{"jkt": null}``: bound to nothing is not unbound; refuse it.
        raise _refused("cnf", "the access token's cnf claim names no confirmation method")
    return Confirmation(jkt, x5t, others)
