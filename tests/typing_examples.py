"""Typical typed use of ``grelmicro.jwt``, checked by ``mypy --strict``.

This file is never run: mypy reads it (it is listed in ``[tool.mypy] files``)
and fails if the public API stops giving users precise types. Everything is
wrapped in functions, so importing it has no effect beyond the definitions.
``assert_type`` pins the type mypy infers at each step.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from typing_extensions import assert_type

from grelmicro.jwt import (
    CacheInfo,
    Claims,
    ConfigurationError,
    ExpiredTokenError,
    JWTConfig,
    JWTError,
    JWTVerifier,
    Key,
    KeysUnavailableError,
    TokenRejectedError,
    VerifyFunction,
    unverified_header,
)


class AccessToken(BaseModel):
    """The claims an endpoint needs, validated by pydantic."""

    sub: str
    aud: list[str]
    exp: int
    scope: str = ""


def build_from_keys(secret: bytes, public_pem: str) -> JWTVerifier:
    """Keys in code plus a full policy."""
    return JWTVerifier(
        [
            Key.secret(secret, "HS256", kid="k1"),
            Key.pem(public_pem, "RS256"),
        ],
        audience="https://api.example.com",
        issuer=["https://idp.example.com/", "https://idp2.example.com/"],
        algorithms=["HS256", "RS256"],
        leeway=5,
        required=("exp", "sub"),
        typ="at+jwt",
        max_age=3600,
        max_token_size=4096,
        max_depth=32,
        cache_size=2048,
        cache_ttl=120.0,
        cache_key="digest",
        clock=lambda: 1_700_000_000.0,
    )


def build_from_jwks(document: Mapping[str, Any] | str) -> JWTVerifier:
    """A JWKS document given in code, with a rejection hook and counters."""

    def count(error: TokenRejectedError) -> None:
        assert_type(error.reason, str)

    return JWTVerifier(jwks=document, on_reject=count, cache_stats=True)


def build_from_environment(environ: Mapping[str, str], jwk: Mapping[str, Any]) -> JWTVerifier:
    """Policy from ``GRELMICRO_JWT_*``; the key stays in code."""
    return JWTVerifier.from_env([Key.jwk(jwk)], environ=environ)


def build_from_config() -> JWTVerifier | None:
    """A validated config object; build errors are ``ConfigurationError``."""
    try:
        config = JWTConfig.build(audience="api", leeway=2)
    except ConfigurationError as exc:
        assert_type(exc.message, str)
        return None
    assert_type(config.audience, tuple[str, ...])
    assert_type(config.max_age, float | None)
    return JWTVerifier([Key.secret(b"s" * 32)], config=config)


def authenticate(verifier: JWTVerifier, authorization: bytes) -> AccessToken | None:
    """Verify a header value; read the claims through their typed accessors."""
    token = authorization.removeprefix(b"Bearer ")
    try:
        claims = verifier.verify(token)
    except ExpiredTokenError as expired:
        assert_type(expired.expires_at, datetime)  # always set
        return None
    except TokenRejectedError as exc:
        assert_type(exc.reason, str)
        return None
    except KeysUnavailableError:
        raise
    assert_type(claims, Claims)
    assert_type(claims["sub"], Any)
    assert_type(claims.get("tenant"), Any)
    assert_type(claims.subject, str | None)
    assert_type(claims.require("sub"), Any)
    assert_type(claims.require("sub", str), str)  # a str, or a 401 refusal
    assert_type(claims.require("roles", tuple), tuple[Any, ...])
    assert_type(claims.issuer, str | None)
    assert_type(claims.audience, tuple[str, ...])
    assert_type(claims.token_id, str | None)
    assert_type(claims.expires_at, datetime | None)
    assert_type(claims.issued_at, datetime | None)
    assert_type(claims.not_before, datetime | None)
    assert_type(claims.scopes, frozenset[str])
    assert_type(claims.has_scopes("read", "write"), bool)
    assert_type(claims.to_dict(), dict[str, Any])
    mapping: Mapping[str, Any] = claims
    assert_type(len(mapping), int)
    return claims.to_model(AccessToken)


async def authenticate_async(verifier: JWTVerifier, token: str) -> str | None:
    """The async front door returns the same ``Claims``."""
    try:
        claims = await verifier.verify_async(token, now=1_700_000_000)
    except JWTError:
        return None
    return claims.subject


def pinned_time(verifier: JWTVerifier, token: str) -> Claims:
    """Tests pin the clock per call."""
    verify: VerifyFunction = verifier.verify
    return verify(token, now=1_700_000_000.5)


def operate(verifier: JWTVerifier, new_jwk: Mapping[str, Any]) -> int | None:
    """Rotate keys, read the cache counters, inspect a header."""
    verifier.rotate([Key.jwk(new_jwk)])
    verifier.rotate(jwks={"keys": [dict(new_jwk)]})
    info = verifier.cache_info()
    assert_type(info, CacheInfo)
    assert_type(info.size, int)
    assert_type(verifier.algorithms, tuple[str, ...])
    key = Key.jwk(new_jwk)
    assert_type(key.kid, str | None)
    assert_type(key.fingerprint, str)
    assert_type(unverified_header("a.b.c"), dict[str, object])
    return info.hits


def mistakes_mypy_catches(secret: bytes) -> None:
    """Algorithm names and ``cache_key`` are ``Literal`` types (issue 10).

    Each ignore below is needed: were a name accepted as a plain ``str``,
    ``warn_unused_ignores`` (part of ``--strict``) would fail this file.
    """
    Key.secret(secret, "RS257")  # type: ignore[arg-type]
    Key.secret(secret, "hs256")  # type: ignore[arg-type]
    JWTVerifier([Key.secret(secret)], algorithms=["HS257"])  # type: ignore[list-item]
    JWTVerifier([Key.secret(secret)], cache_key="sha")  # type: ignore[arg-type]
    # The setting keywords come from JWTSettings: a misspelt one or a wrong
    # type is still an error, as with a hand-written signature.
    JWTVerifier([Key.secret(secret)], leewy=5)  # type: ignore[call-arg]
    JWTVerifier([Key.secret(secret)], leeway="5")  # type: ignore[arg-type]
    JWTVerifier([Key.secret(secret)], leeway=timedelta(seconds=5), algorithms="HS256")


def testing_helpers() -> str:
    """grelmicro.jwt.testing: tokens, headers and a verifier, typed."""
    from grelmicro.jwt.testing import TestIssuer  # noqa: PLC0415

    issuer = TestIssuer("EdDSA", audience=["a", "b"])
    assert_type(issuer.mint(scope=["x"], header={"kid": None}), str)
    assert_type(issuer.bearer(roles=["admin"]), dict[str, str])
    assert_type(issuer.jwks, dict[str, Any])
    verifier = issuer.verifier(leeway=5)
    assert_type(verifier, JWTVerifier)
    return verifier.verify(issuer.mint()).require("sub", str)


def provider_testing_helpers() -> str | None:
    """Provider-shaped test issuers, their presets and servers, and tenant health, typed."""
    from grelmicro.jwt import Issuer, TenantLookupHealth  # noqa: PLC0415
    from grelmicro.jwt.testing import (  # noqa: PLC0415
        CognitoTestIssuer,
        EntraTestIssuer,
        ServedProvider,
    )

    entra = EntraTestIssuer(tenant="t1", version=1, audience="api://orders")
    assert_type(entra.mint(tenant="t2", version=2, guest=True, scp=["a"]), str)
    assert_type(entra.issuer_for("t2"), str)
    assert_type(entra.preset(tenants=["t1"], guests="refuse"), Issuer)
    verifier = entra.verifier(tenants=["t1", "t2"], versions=(1, 2))
    assert_type(verifier, JWTVerifier)
    entra.mint(version=3)  # type: ignore[arg-type]
    with entra.serve(port=0) as server:
        assert_type(server, ServedProvider)
        assert_type(server.preset(tenant="t1"), Issuer)
    assert_type(CognitoTestIssuer().mint(token_use="id"), str)
    lookups = verifier.health().tenant_lookups
    assert_type(lookups, tuple[TenantLookupHealth, ...])
    return lookups[0].last_error if lookups else None
