"""Mint DPoP proofs (RFC 9449) and DPoP-bound access tokens by hand, for the tests.

Independent of ``grelmicro``: proofs are signed with ``cryptography`` through
:mod:`forge`, which also computes the RFC 7638 thumbprint and ``ath`` with
:mod:`hashlib` and :mod:`json`, so the core is checked against another
implementation of both RFCs. It lives in ``tests/`` so that the security suite
and the benchmarks import it as they import the forge; :func:`present` takes the
verifiers it drives as arguments, so this module imports no product code either.
"""

from __future__ import annotations

import uuid
from typing import Any

from forge import NOW, Signer, ath, hmac_key, private_key, thumbprint

#: Proof algorithms the tests cover (RFC 9449 names asymmetric JWS algorithms).
PROOF_ALGORITHMS = ("ES256", "ES384", "PS256", "RS256", "EdDSA")

#: The URI every test request goes to, unless it says otherwise.
URI = "https://api.example.com/items"


class ProofSigner:
    """A client's DPoP key: signs proofs and names itself in ``cnf.jkt``."""

    def __init__(self, algorithm: str = "ES256", *, seed: int = 0) -> None:
        self.key: Signer = private_key(algorithm, seed=seed)
        self.algorithm = algorithm
        public = self.key.public_jwk()
        self.jwk = {name: value for name, value in public.items() if name not in {"alg", "use"}}
        self.jkt = thumbprint(self.jwk)

    def proof(
        self,
        method: str = "GET",
        uri: str = URI,
        access_token: str | None = None,
        *,
        iat: float = NOW,
        jti: str | None = None,
        nonce: str | None = None,
        header: dict[str, Any] | None = None,
        claims: dict[str, Any] | None = None,
        drop: tuple[str, ...] = (),
    ) -> str:
        """A proof for one request; ``header``/``claims`` override, ``drop`` removes members."""
        head: dict[str, Any] = {"typ": "dpop+jwt", "alg": self.algorithm, "jwk": self.jwk}
        head.update(header or {})
        body: dict[str, Any] = {
            "jti": jti or uuid.uuid4().hex,
            "htm": method,
            "htu": uri,
            "iat": iat,
        }
        if access_token is not None:
            body["ath"] = ath(access_token)
        if nonce is not None:
            body["nonce"] = nonce
        body.update(claims or {})
        for name in drop:
            head.pop(name, None)
            body.pop(name, None)
        return self.key.mint(body, header=head)


#: The issuer of the access tokens (HS256 over :data:`forge.SECRET`).
ISSUER = hmac_key()


def access_token(jkt: str | None, **claims: Any) -> str:
    """An access token from :data:`ISSUER`, bound to ``jkt`` when given."""
    body: dict[str, Any] = {"sub": "user-1", "exp": NOW + 3600, "iat": NOW}
    if jkt is not None:
        body["cnf"] = {"jkt": jkt}
    body.update(claims)
    return ISSUER.mint(body)


def present(
    dpop: Any,
    tokens: Any,
    token: str,
    proof: str | None,
    *,
    scheme: str = "DPoP",
    method: str = "GET",
    uri: str = URI,
    now: float = NOW,
) -> None:
    """Verify the token with ``tokens``, then apply ``dpop``'s rules, as the FastAPI glue does.

    ``tokens`` is a ``JWTVerifier`` and ``dpop`` a ``DPoPVerifier``.
    """
    claims = tokens.verify(token, now=NOW)
    dpop.check(
        scheme=scheme,
        access_token=token,
        claims=claims,
        proof=proof,
        method=method,
        uri=uri,
        now=now,
    )
