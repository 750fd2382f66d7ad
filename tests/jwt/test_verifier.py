"""JWTVerifier: policy boundaries, inputs, keys, rotation, configuration, hooks."""

from __future__ import annotations

import gc
import json
import logging
import weakref
from collections.abc import Callable
from typing import Any

import pydantic
import pytest
from minting import (
    NOW,
    SECRET,
    FakeClock,
    SigningKey,
    hmac_key,
    nested_array,
    private_key,
    tamper,
    token_of_size,
)

from grelmicro.jwt import (
    AlgorithmNotAllowedError,
    CacheInfo,
    Claims,
    ConfigurationError,
    ExpiredTokenError,
    InvalidAudienceError,
    InvalidClaimError,
    InvalidIssuerError,
    InvalidKeyError,
    InvalidSignatureError,
    InvalidTokenTypeError,
    JWTConfig,
    JWTVerifier,
    Key,
    MalformedTokenError,
    MissingClaimError,
    TokenIssuedInFutureError,
    TokenNotYetValidError,
    TokenRejectedError,
    TokenTooLargeError,
    TokenTooOldError,
    UnknownKeyError,
    UnsupportedTokenError,
    WeakKeyError,
)

CACHE_MODES = {
    "uncached": {"cache_size": 0},
    "digest": {"cache_key": "digest"},
    "token": {"cache_key": "token"},
}


@pytest.fixture(params=list(CACHE_MODES))
def cache_mode(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each behaviour holds with the cache off, keyed by digest, keyed by token."""
    return dict(CACHE_MODES[request.param])


def outcome(verifier: JWTVerifier, token: object, now: float = NOW) -> tuple[str, str] | Claims:
    """The claims, or ``(class name, reason)`` of the rejection."""
    try:
        return verifier.verify(token, now=now)  # type: ignore[arg-type]
    except TokenRejectedError as exc:
        return (type(exc).__name__, exc.reason)


def rejected(error: type[TokenRejectedError], reason: str) -> tuple[str, str]:
    return (error.__name__, reason)


# -- policy boundaries ---------------------------------------------------------

OK = None

POLICY_TABLE = [
    # exp: valid while now < exp + leeway
    pytest.param({}, {"exp": NOW + 1}, {}, OK, id="exp-one-second-left"),
    pytest.param({}, {"exp": NOW + 0.5}, {}, OK, id="exp-float-half-second-left"),
    pytest.param({}, {"exp": NOW}, {}, rejected(ExpiredTokenError, "expired"), id="exp-equals-now"),
    pytest.param(
        {}, {"exp": NOW - 1}, {}, rejected(ExpiredTokenError, "expired"), id="exp-one-second-ago"
    ),
    pytest.param({"leeway": 5}, {"exp": NOW - 4}, {}, OK, id="exp-within-leeway"),
    pytest.param(
        {"leeway": 5},
        {"exp": NOW - 5},
        {},
        rejected(ExpiredTokenError, "expired"),
        id="exp-at-leeway",
    ),
    # nbf: valid once now >= nbf - leeway
    pytest.param({}, {"nbf": NOW}, {}, OK, id="nbf-equals-now"),
    pytest.param(
        {},
        {"nbf": NOW + 1},
        {},
        rejected(TokenNotYetValidError, "not-yet-valid"),
        id="nbf-one-second-ahead",
    ),
    pytest.param({"leeway": 5}, {"nbf": NOW + 5}, {}, OK, id="nbf-at-leeway"),
    pytest.param(
        {"leeway": 5},
        {"nbf": NOW + 6},
        {},
        rejected(TokenNotYetValidError, "not-yet-valid"),
        id="nbf-beyond-leeway",
    ),
    # iat: not in the future beyond leeway
    pytest.param({}, {"iat": NOW}, {}, OK, id="iat-equals-now"),
    pytest.param(
        {},
        {"iat": NOW + 1},
        {},
        rejected(TokenIssuedInFutureError, "issued-in-future"),
        id="iat-one-second-ahead",
    ),
    pytest.param({"leeway": 5}, {"iat": NOW + 5}, {}, OK, id="iat-at-leeway"),
    pytest.param(
        {"leeway": 5},
        {"iat": NOW + 6},
        {},
        rejected(TokenIssuedInFutureError, "issued-in-future"),
        id="iat-beyond-leeway",
    ),
    # max_age, counted from iat
    pytest.param({"max_age": 60}, {"iat": NOW - 60}, {}, OK, id="max-age-exactly"),
    pytest.param(
        {"max_age": 60},
        {"iat": NOW - 61},
        {},
        rejected(TokenTooOldError, "too-old"),
        id="max-age-one-second-over",
    ),
    pytest.param({"max_age": 60, "leeway": 5}, {"iat": NOW - 65}, {}, OK, id="max-age-at-leeway"),
    pytest.param(
        {"max_age": 60, "leeway": 5},
        {"iat": NOW - 66},
        {},
        rejected(TokenTooOldError, "too-old"),
        id="max-age-beyond-leeway",
    ),
    pytest.param(
        {"max_age": 60},
        {},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="max-age-needs-iat",
    ),
    # audience: one string
    pytest.param({"audience": "api"}, {"aud": "api"}, {}, OK, id="aud-str-match"),
    pytest.param({"audience": "api"}, {"aud": ["other", "api"]}, {}, OK, id="aud-list-contains"),
    pytest.param(
        {"audience": "api"},
        {"aud": "other"},
        {},
        rejected(InvalidAudienceError, "audience"),
        id="aud-str-mismatch",
    ),
    pytest.param(
        {"audience": "api"},
        {"aud": "API"},
        {},
        rejected(InvalidAudienceError, "audience"),
        id="aud-case-sensitive",
    ),
    pytest.param(
        {"audience": "api"},
        {"aud": []},
        {},
        rejected(InvalidAudienceError, "audience"),
        id="aud-empty-list",
    ),
    pytest.param(
        {"audience": "api"},
        {},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="aud-missing",
    ),
    pytest.param(
        {"audience": "api"},
        {"aud": ["api", 1]},
        {},
        rejected(InvalidClaimError, "invalid-claim"),
        id="aud-not-strings",
    ),
    # audience: several configured
    pytest.param({"audience": ["api", "admin"]}, {"aud": "admin"}, {}, OK, id="aud-any-of-list"),
    pytest.param(
        {"audience": ["api", "admin"]}, {"aud": ["x", "api"]}, {}, OK, id="aud-list-overlap"
    ),
    pytest.param(
        {"audience": ["api", "admin"]},
        {"aud": ["x", "y"]},
        {},
        rejected(InvalidAudienceError, "audience"),
        id="aud-list-no-overlap",
    ),
    # no audience configured: a token naming one is refused (RFC 7519 §4.1.3)
    pytest.param(
        {}, {"aud": "api"}, {}, rejected(InvalidAudienceError, "audience"), id="aud-unexpected"
    ),
    # issuer
    pytest.param({"issuer": "https://idp/"}, {"iss": "https://idp/"}, {}, OK, id="iss-match"),
    pytest.param(
        {"issuer": "https://idp/"},
        {"iss": "https://idp"},
        {},
        rejected(InvalidIssuerError, "issuer"),
        id="iss-exact-not-prefix",
    ),
    pytest.param(
        {"issuer": "https://idp/"},
        {"iss": "HTTPS://IDP/"},
        {},
        rejected(InvalidIssuerError, "issuer"),
        id="iss-case-sensitive",
    ),
    pytest.param(
        {"issuer": "https://idp/"},
        {},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="iss-missing",
    ),
    pytest.param(
        {"issuer": "https://idp/"},
        {"iss": 7},
        {},
        rejected(InvalidClaimError, "invalid-claim"),
        id="iss-not-a-string",
    ),
    pytest.param({"issuer": ["a", "b"]}, {"iss": "b"}, {}, OK, id="iss-any-of-list"),
    pytest.param(
        {"issuer": ["a", "b"]},
        {"iss": "c"},
        {},
        rejected(InvalidIssuerError, "issuer"),
        id="iss-none-of-list",
    ),
    pytest.param({}, {"iss": "anyone"}, {}, OK, id="iss-unchecked-without-policy"),
    # required claims
    pytest.param({}, {"exp": None}, {}, rejected(MissingClaimError, "missing-claim"), id="exp-req"),
    pytest.param(
        {"required": []},
        {"exp": None},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="required-empty-keeps-exp",
    ),
    pytest.param({"require_exp": False}, {"exp": None}, {}, OK, id="require-exp-off-allows-no-exp"),
    pytest.param({"required": ["exp", "sub"]}, {"sub": "u1"}, {}, OK, id="required-present"),
    pytest.param(
        {"required": ["exp", "sub"]},
        {},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="required-absent",
    ),
    pytest.param(
        {"required": "tenant"},
        {"exp": None},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="required-str-adds-to-exp",
    ),
    pytest.param(
        {"required": "tenant"},
        {"exp": None, "tenant": "t"},
        {},
        rejected(MissingClaimError, "missing-claim"),
        id="required-str-still-needs-exp",
    ),
    pytest.param({"required": "tenant"}, {"tenant": "t"}, {}, OK, id="required-str"),
    # typ header (RFC 9068 at+jwt, media-type comparison)
    pytest.param({"typ": "at+jwt"}, {}, {"typ": "at+jwt"}, OK, id="typ-exact"),
    pytest.param({"typ": "at+jwt"}, {}, {"typ": "AT+JWT"}, OK, id="typ-case-insensitive"),
    pytest.param({"typ": "at+jwt"}, {}, {"typ": "application/at+jwt"}, OK, id="typ-app-prefix"),
    pytest.param(
        {"typ": "at+jwt"},
        {},
        {"typ": "JWT"},
        rejected(InvalidTokenTypeError, "type"),
        id="typ-other",
    ),
    pytest.param(
        {"typ": "at+jwt"},
        {},
        {"typ": None},
        rejected(InvalidTokenTypeError, "type"),
        id="typ-absent",
    ),
    pytest.param(
        {"typ": "at+jwt"},
        {},
        {"typ": "at+jwt "},
        rejected(InvalidTokenTypeError, "type"),
        id="typ-trailing-space",
    ),
    pytest.param({}, {}, {"typ": "anything"}, OK, id="typ-unchecked-without-policy"),
    # algorithms: the token's alg must be allowed and be the key's own
    pytest.param(
        {}, {}, {"alg": "HS384"}, rejected(AlgorithmNotAllowedError, "algorithm"), id="alg-other"
    ),
    pytest.param(
        {},
        {},
        {"alg": "none"},
        rejected(AlgorithmNotAllowedError, "algorithm"),
        id="alg-none",
    ),
    pytest.param(
        {},
        {},
        {"alg": "RS256"},
        rejected(AlgorithmNotAllowedError, "algorithm"),
        id="alg-confusion",
    ),
    pytest.param({"algorithms": "HS256"}, {}, {}, OK, id="alg-allowed-str"),
    pytest.param({"algorithms": ["HS256", "RS256"]}, {}, {}, OK, id="alg-allowed-list"),
    # header features refused
    pytest.param(
        {},
        {},
        {"crit": ["ext"], "ext": 1},
        rejected(UnsupportedTokenError, "unsupported"),
        id="crit-unknown",
    ),
]


@pytest.mark.parametrize(("settings", "claims", "header", "expected"), POLICY_TABLE)
def test_policy_boundary(
    settings: dict[str, Any],
    claims: dict[str, Any],
    header: dict[str, Any],
    expected: tuple[str, str] | None,
    cache_mode: dict[str, Any],
    signer: SigningKey,
    make_verifier: Callable[..., JWTVerifier],
) -> None:
    # Arrange
    verifier = make_verifier(**settings, **cache_mode)
    payload = {"exp": NOW + 3600, **claims}
    token = signer.mint({k: v for k, v in payload.items() if v is not None}, **header)

    # Act
    result = outcome(verifier, token)
    again = outcome(verifier, token)  # a cached answer must be the same answer

    # Assert
    if expected is None:
        assert isinstance(result, Claims)
        assert result == {k: v for k, v in payload.items() if v is not None}
        assert again == result
    else:
        assert result == expected
        assert again == expected


def test_algorithms_allow_list_refuses_a_configured_keys_algorithm(cache_mode: dict[str, Any]):
    rsa = private_key("RS256", kid="r1")
    hs = hmac_key(kid="h1")
    verifier = JWTVerifier(
        [Key.secret(SECRET, kid="h1"), Key.pem(rsa.public_pem(), "RS256", kid="r1")],
        algorithms=["RS256"],
        **cache_mode,
    )

    assert verifier.algorithms == ("RS256",)
    assert outcome(verifier, hs.mint({"exp": NOW + 60})) == rejected(
        AlgorithmNotAllowedError, "algorithm"
    )
    assert isinstance(outcome(verifier, rsa.mint({"exp": NOW + 60})), Claims)


def test_algorithms_default_to_the_keys_own():
    rsa = private_key("RS256")
    verifier = JWTVerifier([Key.secret(SECRET, kid="h"), Key.pem(rsa.public_pem(), "RS256")])

    assert set(verifier.algorithms) == {"HS256", "RS256"}


@pytest.mark.parametrize("size", [200, 301, 1002, None])
def test_max_token_size_boundary(size: int | None, cache_mode: dict[str, Any], signer: SigningKey):
    settings = {} if size is None else {"max_token_size": size}
    limit = 8192 if size is None else size  # 8 KiB by default
    verifier = JWTVerifier([Key.secret(SECRET)], **settings, **cache_mode)
    fits = token_of_size(signer, limit, {"exp": NOW + 60})
    over = token_of_size(signer, limit + 1, {"exp": NOW + 60})

    assert len(fits) == limit
    assert isinstance(outcome(verifier, fits), Claims)
    assert isinstance(outcome(verifier, fits.encode()), Claims)
    assert outcome(verifier, over) == rejected(TokenTooLargeError, "too-large")
    assert outcome(verifier, over.encode()) == rejected(TokenTooLargeError, "too-large")


@pytest.mark.parametrize("limit", [2, 3, 10, 64])
def test_max_depth_boundary(limit: int, cache_mode: dict[str, Any], signer: SigningKey):
    # The payload object is level 1; a claim holding n nested arrays reaches n + 1.
    verifier = JWTVerifier([Key.secret(SECRET)], max_depth=limit, **cache_mode)
    at_limit = signer.mint({"exp": NOW + 60, "deep": nested_array(limit - 1)})
    over_limit = signer.mint({"exp": NOW + 60, "deep": nested_array(limit)})

    assert isinstance(outcome(verifier, at_limit), Claims)
    assert outcome(verifier, over_limit) == rejected(TokenTooLargeError, "too-large")


def test_max_depth_applies_to_the_header(signer: SigningKey):
    verifier = JWTVerifier([Key.secret(SECRET)], max_depth=3)

    assert isinstance(outcome(verifier, signer.mint({"exp": NOW + 60}, x=[["a"]])), Claims)
    assert outcome(verifier, signer.mint({"exp": NOW + 60}, x=[[["a"]]])) == rejected(
        TokenTooLargeError, "too-large"
    )


# -- inputs ------------------------------------------------------------------------


def test_verify_accepts_str_and_bytes_alike(cache_mode: dict[str, Any], token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], **cache_mode)
    text = token(sub="u1")

    from_str = verifier.verify(text, now=NOW)
    from_bytes = verifier.verify(text.encode("ascii"), now=NOW)
    from_bytes_again = verifier.verify(text.encode("ascii"), now=NOW)

    assert from_str == from_bytes == from_bytes_again == {"exp": NOW + 3600, "sub": "u1"}


NOT_TOKENS = [
    pytest.param(None, MalformedTokenError, id="None"),
    pytest.param(0, MalformedTokenError, id="int"),
    pytest.param(3.5, MalformedTokenError, id="float"),
    pytest.param(True, MalformedTokenError, id="bool"),
    pytest.param([], MalformedTokenError, id="list"),
    pytest.param(["a.b.c"], MalformedTokenError, id="list-of-str"),
    pytest.param({}, MalformedTokenError, id="dict"),
    pytest.param(object(), MalformedTokenError, id="object"),
    pytest.param(b"", MalformedTokenError, id="empty-bytes"),
    pytest.param("", MalformedTokenError, id="empty-str"),
    pytest.param(".", MalformedTokenError, id="dot"),
    pytest.param("..", MalformedTokenError, id="two-dots"),
    pytest.param("a.b", MalformedTokenError, id="two-segments"),
    pytest.param("Bearer abc", MalformedTokenError, id="scheme-left-in"),
    pytest.param("é.é.é", MalformedTokenError, id="non-ascii"),
    pytest.param("\x00.\x00.\x00", MalformedTokenError, id="nul-bytes"),
    pytest.param("a.b.c.d.e", UnsupportedTokenError, id="jwe-shape"),
    pytest.param("x" * (1 << 20), TokenTooLargeError, id="one-MB-str"),
    pytest.param(b"x" * (1 << 20), TokenTooLargeError, id="one-MB-bytes"),
    pytest.param("é" * 5000, TokenTooLargeError, id="multibyte-over-limit-in-bytes"),
    pytest.param(bytearray(b"a.b.c"), MalformedTokenError, id="bytearray"),
    pytest.param(memoryview(b"a.b.c"), MalformedTokenError, id="memoryview"),
]


@pytest.mark.parametrize(("value", "error"), NOT_TOKENS)
def test_anything_that_is_not_a_token_is_rejected_never_a_type_error(
    value: object,
    error: type[TokenRejectedError],
    cache_mode: dict[str, Any],
    make_verifier: Callable[..., JWTVerifier],
):
    verifier = make_verifier(**cache_mode)

    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(value, now=NOW)  # type: ignore[arg-type]

    assert type(caught.value) is error
    assert caught.value.reason == error.reason


def test_a_valid_token_in_a_bytearray_is_still_refused(
    cache_mode: dict[str, Any], make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier(**cache_mode)

    with pytest.raises(MalformedTokenError):
        verifier.verify(bytearray(token().encode()), now=NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("forge", "error", "reason"),
    [
        pytest.param(tamper, InvalidSignatureError, "signature", id="flipped-signature-bit"),
        pytest.param(
            lambda t: t.rsplit(".", 1)[0] + ".", MalformedTokenError, "malformed", id="no-signature"
        ),
        pytest.param(lambda t: t + "=", MalformedTokenError, "malformed", id="padding"),
        pytest.param(lambda t: " " + t, MalformedTokenError, "malformed", id="leading-space"),
    ],
)
def test_forged_tokens(
    forge: Callable[[str], str],
    error: type[TokenRejectedError],
    reason: str,
    cache_mode: dict[str, Any],
    make_verifier: Callable[..., JWTVerifier],
    token: Callable[..., str],
):
    verifier = make_verifier(**cache_mode)
    good = token()
    verifier.verify(good, now=NOW)  # the genuine token is now cached

    assert outcome(verifier, forge(good)) == rejected(error, reason)


# -- async and clock -----------------------------------------------------------------


@pytest.mark.anyio
async def test_verify_async_returns_the_same_claims(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier()
    text = token(sub="async")

    first = await verifier.verify_async(text, now=NOW)
    second = await verifier.verify_async(text.encode(), now=NOW)

    assert first.subject == second.subject == "async"


@pytest.mark.anyio
async def test_verify_async_raises_the_same_errors(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier()

    with pytest.raises(ExpiredTokenError):
        await verifier.verify_async(token(exp=NOW - 1), now=NOW)
    with pytest.raises(MalformedTokenError):
        await verifier.verify_async(None)  # type: ignore[arg-type]


def test_injected_clock_is_used_when_now_is_not_given(
    cache_mode: dict[str, Any], make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    clock = FakeClock(NOW - 11)
    verifier = make_verifier(clock=clock, **cache_mode)
    text = token(exp=NOW + 10, nbf=NOW - 10)

    with pytest.raises(TokenNotYetValidError):
        verifier.verify(text)
    clock.now = NOW
    assert verifier.verify(text).get("exp") == NOW + 10
    clock.now = NOW + 9.5
    assert verifier.verify(text).get("exp") == NOW + 10
    clock.now = NOW + 10
    with pytest.raises(ExpiredTokenError):
        verifier.verify(text)


def test_now_argument_wins_over_the_clock(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier(clock=FakeClock(NOW + 10_000))

    assert verifier.verify(token(exp=NOW + 10), now=NOW).get("exp") == NOW + 10


def test_default_clock_is_wall_time(make_verifier: Callable[..., JWTVerifier]):
    verifier = make_verifier()
    signer = hmac_key()

    with pytest.raises(ExpiredTokenError):
        verifier.verify(signer.mint({"exp": 1_000_000_000}))  # 2001
    assert verifier.verify(signer.mint({"exp": 32_000_000_000})).get("exp") == 32_000_000_000


# -- keys and JWKS -------------------------------------------------------------------


def key_sources(signer: SigningKey) -> dict[str, dict[str, Any]]:
    jwk = signer.public_jwk()
    return {
        "Key.pem": {"keys": [Key.pem(signer.public_pem(), signer.algorithm, kid=signer.kid)]},
        "Key.pem-str": {
            "keys": [Key.pem(signer.public_pem().decode(), signer.algorithm, kid=signer.kid)]
        },
        "Key.jwk-mapping": {"keys": [Key.jwk(jwk)]},
        "Key.jwk-text": {"keys": [Key.jwk(json.dumps(jwk))]},
        "single-Key": {"keys": Key.jwk(jwk)},
        "jwks-mapping": {"jwks": {"keys": [jwk]}},
        "jwks-str": {"jwks": json.dumps({"keys": [jwk]})},
        "jwks-bytes": {"jwks": json.dumps({"keys": [jwk]}).encode()},
    }


@pytest.mark.parametrize(
    "source",
    [
        "Key.pem",
        "Key.pem-str",
        "Key.jwk-mapping",
        "Key.jwk-text",
        "single-Key",
        "jwks-mapping",
        "jwks-str",
        "jwks-bytes",
    ],
)
def test_every_key_source_verifies(source: str, asymmetric: SigningKey):
    verifier = JWTVerifier(**key_sources(asymmetric)[source])
    text = asymmetric.mint({"exp": NOW + 60, "sub": "k"})

    assert verifier.verify(text, now=NOW).subject == "k"
    assert asymmetric.algorithm in verifier.algorithms
    assert outcome(verifier, tamper(text)) == rejected(InvalidSignatureError, "signature")


@pytest.mark.parametrize("algorithm", ["HS256", "HS384", "HS512"])
def test_hmac_algorithms(algorithm: str):
    signer = hmac_key(algorithm, secret=SECRET + b"-" * 20)
    verifier = JWTVerifier([Key.secret(SECRET + b"-" * 20, algorithm)])

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW).get("exp") == NOW + 1


@pytest.mark.parametrize(
    "algorithm", ["RS384", "RS512", "PS384", "PS512", "ES384", "ES512", "ES256K", "Ed25519"]
)
def test_other_asymmetric_algorithms(algorithm: str):
    signer = private_key(algorithm)
    verifier = JWTVerifier([Key.pem(signer.public_pem(), algorithm)])

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW).get("exp") == NOW + 1


def test_symmetric_jwks_needs_allow_symmetric():
    jwks = {"keys": [hmac_key(kid="h1").public_jwk()]}

    with pytest.raises(InvalidKeyError) as caught:
        JWTVerifier(jwks=jwks)
    verifier = JWTVerifier(jwks=jwks, allow_symmetric=True)

    assert verifier.verify(hmac_key(kid="h1").mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    assert "TOPSECRET" not in str(caught.value)


def test_jwks_skips_an_unusable_key_and_logs_it(caplog: pytest.LogCaptureFixture):
    rsa = private_key("RS256", kid="r1")
    jwks = {"keys": [hmac_key(kid="h1").public_jwk(), rsa.public_jwk()]}

    with caplog.at_level(logging.WARNING, logger="grelmicro.jwt"):
        verifier = JWTVerifier(jwks=jwks)

    assert verifier.algorithms == ("RS256",)
    assert verifier.verify(rsa.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    assert len(caplog.records) == 1
    assert "'h1'" in caplog.records[0].getMessage()
    assert "symmetric" in caplog.records[0].getMessage()
    assert hmac_key().public_jwk()["k"] not in caplog.records[0].getMessage()


def test_keys_and_jwks_combine():
    rsa = private_key("RS256", kid="r1")
    verifier = JWTVerifier([Key.secret(SECRET, kid="h1")], jwks={"keys": [rsa.public_jwk()]})

    assert verifier.verify(rsa.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    assert verifier.verify(hmac_key(kid="h1").mint({"exp": NOW + 2}), now=NOW)["exp"] == NOW + 2


@pytest.mark.parametrize(
    ("configured_kid", "token_kid", "expected"),
    [
        pytest.param("k1", "k1", OK, id="kid-match"),
        pytest.param("k1", "k2", rejected(UnknownKeyError, "unknown-key"), id="kid-mismatch"),
        # design.md §3: a kid-less token takes the only key that could verify it.
        pytest.param("k1", None, OK, id="token-lacks-kid-one-key"),
        pytest.param(None, "anything", OK, id="key-without-kid-takes-any"),
        pytest.param(None, None, OK, id="neither-has-kid"),
    ],
)
def test_key_selection_by_kid(
    configured_kid: str | None, token_kid: str | None, expected: tuple[str, str] | None
):
    verifier = JWTVerifier([Key.secret(SECRET, kid=configured_kid)])
    text = hmac_key(kid=token_kid).mint({"exp": NOW + 1})

    result = outcome(verifier, text)

    assert isinstance(result, Claims) if expected is None else result == expected


def test_wrong_key_is_a_signature_error(make_verifier: Callable[..., JWTVerifier]):
    other = hmac_key(secret=b"another-secret-of-sufficient-length-0000")

    assert outcome(make_verifier(), other.mint({"exp": NOW + 1})) == rejected(
        InvalidSignatureError, "signature"
    )


# -- rotation -------------------------------------------------------------------------


def test_rotate_swaps_keys_and_clears_the_cache(cache_mode: dict[str, Any]):
    old = private_key("ES256", kid="old")
    new = private_key("ES256", kid="new", seed=1)
    verifier = JWTVerifier([Key.pem(old.public_pem(), "ES256", kid="old")], **cache_mode)
    old_token = old.mint({"exp": NOW + 60})
    verifier.verify(old_token, now=NOW)
    config = verifier.config

    verifier.rotate([Key.pem(new.public_pem(), "ES256", kid="new")])

    assert verifier.cache_info().size == 0
    assert outcome(verifier, old_token) == rejected(UnknownKeyError, "unknown-key")
    assert verifier.verify(new.mint({"exp": NOW + 60}), now=NOW)["exp"] == NOW + 60
    assert verifier.config is config  # the policy stays


def test_rotate_same_kid_new_key_never_serves_the_old_tokens_claims():
    # Same kid before and after: only a cleared cache stops the old token.
    old = private_key("EdDSA", kid="k")
    new = private_key("EdDSA", kid="k", seed=1)
    verifier = JWTVerifier([Key.pem(old.public_pem(), "EdDSA", kid="k")])
    old_token = old.mint({"exp": NOW + 60})
    verifier.verify(old_token, now=NOW)

    verifier.rotate(jwks={"keys": [new.public_jwk()]})

    assert outcome(verifier, old_token) == rejected(InvalidSignatureError, "signature")


def test_rotate_with_bad_keys_keeps_the_old_ones(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier()
    text = token()

    with pytest.raises(ConfigurationError):
        verifier.rotate([])
    with pytest.raises(InvalidKeyError):
        verifier.rotate(jwks="{not json")

    assert verifier.verify(text, now=NOW)["exp"] == NOW + 3600


def test_rotate_to_a_symmetric_jwks_needs_allow_symmetric(
    make_verifier: Callable[..., JWTVerifier],
):
    verifier = make_verifier()
    fresh = hmac_key(secret=b"z" * 40, kid="z")
    jwks = {"keys": [fresh.public_jwk()]}

    with pytest.raises(InvalidKeyError):
        verifier.rotate(jwks=jwks)
    verifier.rotate(jwks=jwks, allow_symmetric=True)

    assert verifier.verify(fresh.mint({"exp": NOW + 5}), now=NOW)["exp"] == NOW + 5


def test_verifier_is_immutable(make_verifier: Callable[..., JWTVerifier]):
    verifier = make_verifier()

    with pytest.raises(AttributeError):
        verifier.verify = lambda *a, **k: None  # type: ignore[method-assign,assignment]
    with pytest.raises(AttributeError):
        verifier.config = JWTConfig()  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        verifier.config.leeway = 100  # type: ignore[misc]


# -- configuration ---------------------------------------------------------------------

BAD_SETTINGS = [
    pytest.param({"audience": ""}, "audience", id="audience-empty"),
    pytest.param({"audience": [""]}, "audience", id="audience-empty-item"),
    pytest.param({"audience": 5}, "audience", id="audience-int"),
    pytest.param({"issuer": [1]}, "issuer", id="issuer-int"),
    pytest.param({"algorithms": ["none"]}, "algorithms", id="algorithms-none"),
    pytest.param({"algorithms": "HS999"}, "algorithms", id="algorithms-unknown"),
    pytest.param({"algorithms": []}, "algorithms", id="algorithms-empty"),
    pytest.param({"algorithms": ["RS256"]}, "algorithms", id="algorithms-no-key-serves"),
    pytest.param({"leeway": -1}, "leeway", id="leeway-negative"),
    pytest.param({"leeway": float("nan")}, "leeway", id="leeway-nan"),
    pytest.param({"leeway": 10**9}, "leeway", id="leeway-huge"),
    pytest.param({"leeway": "soon"}, "leeway", id="leeway-text"),
    pytest.param({"required": [""]}, "required", id="required-empty-name"),
    pytest.param({"typ": ""}, "typ", id="typ-empty"),
    pytest.param({"max_age": 0}, "max_age", id="max-age-zero"),
    pytest.param({"max_age": -5}, "max_age", id="max-age-negative"),
    pytest.param({"max_token_size": 15}, "max_token_size", id="max-token-size-tiny"),
    pytest.param({"max_token_size": (1 << 20) + 1}, "max_token_size", id="max-token-size-huge"),
    pytest.param({"max_depth": 1}, "max_depth", id="max-depth-one"),
    pytest.param({"max_depth": 513}, "max_depth", id="max-depth-huge"),
    pytest.param({"cache_size": -1}, "cache_size", id="cache-size-negative"),
    pytest.param({"cache_size": 1.5}, "cache_size", id="cache-size-fraction"),
    pytest.param({"cache_ttl": 0}, "cache_ttl", id="cache-ttl-zero"),
    pytest.param({"cache_ttl": float("inf")}, "cache_ttl", id="cache-ttl-inf"),
    pytest.param({"cache_key": "sha1"}, "cache_key", id="cache-key-unknown"),
    pytest.param({"clock": 5}, "clock", id="clock-not-callable"),
    pytest.param({"on_reject": "log"}, "on_reject", id="on-reject-not-callable"),
]


@pytest.mark.parametrize(("settings", "field"), BAD_SETTINGS)
def test_invalid_configuration_names_the_field(
    settings: dict[str, Any], field: str, make_verifier: Callable[..., JWTVerifier]
):
    with pytest.raises(ConfigurationError) as caught:
        make_verifier(**settings)

    assert field in str(caught.value)
    assert caught.value.reason == "invalid-config"


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        pytest.param({"leeway": SECRET.decode()}, "leeway", id="leeway"),
        pytest.param({"cache_key": SECRET.decode()}, "cache_key", id="cache_key"),
        pytest.param({"audience": [SECRET.decode(), 3]}, "audience", id="audience"),
        pytest.param({"max_age": SECRET.decode()}, "max_age", id="max_age"),
        pytest.param({"typ": SECRET}, "typ", id="typ-bytes"),
    ],
)
def test_configuration_error_never_echoes_the_value(
    settings: dict[str, Any], field: str, make_verifier: Callable[..., JWTVerifier]
):
    with pytest.raises(ConfigurationError) as caught:
        make_verifier(**settings)

    assert field in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)
    assert "TOPSECRET" not in repr(caught.value)


def test_config_and_settings_are_exclusive():
    with pytest.raises(ConfigurationError, match="leeway"):
        JWTVerifier([Key.secret(SECRET)], config=JWTConfig(), leeway=3)


def test_config_object_is_used(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], config=JWTConfig.build(audience="api"))

    assert verifier.config.audience == ("api",)
    assert verifier.verify(token(aud="api"), now=NOW).audience == ("api",)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        pytest.param(None, "keys", id="none"),
        pytest.param([], "keys", id="empty"),
        pytest.param(["not a key"], "Key", id="not-a-Key"),
    ],
)
def test_no_usable_keys_is_a_configuration_error(keys: Any, message: str):
    with pytest.raises(ConfigurationError, match=message):
        JWTVerifier(keys)


@pytest.mark.parametrize(
    ("build", "error"),
    [
        pytest.param(lambda: Key.secret(b"TOPSECRET-short"), WeakKeyError, id="short-secret"),
        pytest.param(lambda: Key.secret(SECRET, "RS256"), InvalidKeyError, id="secret-for-rsa"),
        pytest.param(
            lambda: Key.pem(
                b"-----BEGIN PUBLIC KEY-----\nTOPSECRET\n-----END PUBLIC KEY-----\n", "RS256"
            ),
            InvalidKeyError,
            id="garbage-pem",
        ),
        pytest.param(
            lambda: Key.pem(private_key("ES384").public_pem(), "ES256"),
            InvalidKeyError,
            id="p384-for-es256",
        ),
        pytest.param(
            lambda: Key.jwk({"kty": "oct", "k": "VE9QU0VDUkVU"}, "HS256"),
            InvalidKeyError,
            id="oct-jwk-not-allowed",
        ),
        pytest.param(
            lambda: Key.jwk({"kty": "RSA", "n": "TOPSECRET!", "e": "AQAB"}, "RS256"),
            InvalidKeyError,
            id="jwk-bad-base64",
        ),
        pytest.param(lambda: Key.jwk(42), InvalidKeyError, id="jwk-not-a-mapping"),  # type: ignore[arg-type]
        pytest.param(lambda: Key.secret(SECRET, 256), ConfigurationError, id="alg-not-str"),  # type: ignore[arg-type]
        pytest.param(lambda: Key.secret(SECRET, kid=1), ConfigurationError, id="kid-not-str"),  # type: ignore[arg-type]
        pytest.param(lambda: JWTVerifier(jwks="TOPSECRET{"), InvalidKeyError, id="jwks-not-json"),
        pytest.param(lambda: JWTVerifier(jwks=5), InvalidKeyError, id="jwks-int"),  # type: ignore[arg-type]
    ],
)
def test_bad_keys_fail_at_build_time_without_echoing_material(
    build: Callable[[], object], error: type[ConfigurationError]
):
    with pytest.raises(error) as caught:
        build()

    assert type(caught.value) is error
    assert "TOPSECRET" not in str(caught.value)


def test_rsa_under_2048_bits_is_weak():
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")

    small = SigningKey("RS256", rsa.generate_private_key(public_exponent=65537, key_size=1024))

    with pytest.raises(WeakKeyError, match="2048"):
        Key.pem(small.public_pem(), "RS256")


def test_private_key_is_refused_where_a_public_key_is_expected():
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

    private_pem = private_key("RS256").material.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )

    with pytest.raises(InvalidKeyError, match="private") as caught:
        Key.pem(private_pem, "RS256")
    assert "PRIVATE KEY" not in str(caught.value)


# -- from_env --------------------------------------------------------------------------


def test_from_env_reads_the_policy(token: Callable[..., str]):
    environ = {
        "GRELMICRO_JWT_AUDIENCE": "api, admin",
        "GRELMICRO_JWT_ISSUER": "https://idp/",
        "GRELMICRO_JWT_LEEWAY": "5",
        "GRELMICRO_JWT_ALGORITHMS": "HS256",
        "GRELMICRO_JWT_REQUIRED": "exp,sub",
        "GRELMICRO_JWT_TYP": "at+jwt",
        "GRELMICRO_JWT_MAX_AGE": "600",
        "GRELMICRO_JWT_MAX_TOKEN_SIZE": "4096",
        "GRELMICRO_JWT_MAX_DEPTH": "16",
        "GRELMICRO_JWT_CACHE_SIZE": "7",
        "GRELMICRO_JWT_CACHE_TTL": "30",
        "GRELMICRO_JWT_CACHE_KEY": "token",
        "UNRELATED": "ignored",
    }

    verifier = JWTVerifier.from_env([Key.secret(SECRET)], environ=environ)

    assert verifier.config == JWTConfig(
        audience=("api", "admin"),
        issuer=("https://idp/",),
        algorithms=("HS256",),
        leeway=5.0,
        required=("exp", "sub"),
        typ="at+jwt",
        max_age=600.0,
        max_token_size=4096,
        max_depth=16,
        cache_size=7,
        cache_ttl=30.0,
        cache_key="token",
    )
    assert verifier.cache_info().max_size == 7


def test_from_env_with_an_empty_environment_gives_the_defaults():
    verifier = JWTVerifier.from_env([Key.secret(SECRET)], environ={})

    assert verifier.config == JWTConfig()


def test_from_env_overrides_and_prefix(clock: FakeClock, token: Callable[..., str]):
    verifier = JWTVerifier.from_env(
        [Key.secret(SECRET)],
        environ={"APP_LEEWAY": "5", "GRELMICRO_JWT_LEEWAY": "9", "APP_AUDIENCE": "api"},
        prefix="APP_",
        leeway=7,
        clock=clock,
        cache_stats=True,
    )

    assert verifier.config.leeway == 7.0
    assert verifier.config.audience == ("api",)
    assert verifier.verify(token(aud="api")).audience == ("api",)  # the clock was passed on
    assert verifier.cache_info().misses == 1


@pytest.mark.parametrize("variable", ["SECRET", "PUBLIC_KEY", "JWKS"])
def test_from_env_refuses_key_material_unless_allowed(variable: str):
    environ = {f"GRELMICRO_JWT_{variable}": SECRET.decode()}

    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env([Key.secret(SECRET)], environ=environ)

    assert f"GRELMICRO_JWT_{variable}" in str(caught.value)
    assert "allow_key_material_from_env" in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)


def test_from_env_secret_when_allowed():
    signer = hmac_key("HS384", secret=SECRET, kid="env")
    environ = {
        "GRELMICRO_JWT_SECRET": SECRET.decode(),
        "GRELMICRO_JWT_SECRET_ALGORITHM": "HS384",
        "GRELMICRO_JWT_SECRET_KID": "env",
    }

    verifier = JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)

    assert verifier.algorithms == ("HS384",)
    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1


def test_from_env_public_key_when_allowed():
    signer = private_key("ES256")
    environ = {
        "GRELMICRO_JWT_PUBLIC_KEY": signer.public_pem().decode(),
        "GRELMICRO_JWT_PUBLIC_KEY_ALGORITHM": "ES256",
    }

    verifier = JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    with pytest.raises(ConfigurationError, match="PUBLIC_KEY_ALGORITHM"):
        JWTVerifier.from_env(
            environ={"GRELMICRO_JWT_PUBLIC_KEY": signer.public_pem().decode()},
            allow_key_material_from_env=True,
        )


def test_from_env_jwks_when_allowed():
    signer = private_key("RS256", kid="r1")
    environ = {"GRELMICRO_JWT_JWKS": json.dumps({"keys": [signer.public_jwk()]})}

    verifier = JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GRELMICRO_JWT_LEEWAY", "TOPSECRET"),
        ("GRELMICRO_JWT_CACHE_SIZE", "TOPSECRET"),
        ("GRELMICRO_JWT_CACHE_KEY", "TOPSECRET"),
        ("GRELMICRO_JWT_MAX_AGE", "-1"),
    ],
)
def test_from_env_invalid_value_names_the_setting(variable: str, value: str):
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env([Key.secret(SECRET)], environ={variable: value})

    assert variable.removeprefix("GRELMICRO_JWT_").lower() in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)


def test_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GRELMICRO_JWT_LEEWAY", "12")

    assert JWTVerifier.from_env([Key.secret(SECRET)]).config.leeway == 12.0


# -- hooks, logging, counters ----------------------------------------------------------


def test_on_reject_receives_the_raised_error(
    cache_mode: dict[str, Any], make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    seen: list[TokenRejectedError] = []
    verifier = make_verifier(on_reject=seen.append, **cache_mode)

    with pytest.raises(ExpiredTokenError) as expired:
        verifier.verify(token(exp=NOW - 1), now=NOW)
    with pytest.raises(MalformedTokenError) as malformed:
        verifier.verify(None, now=NOW)  # type: ignore[arg-type]
    with pytest.raises(TokenTooLargeError) as too_large:
        verifier.verify("x" * 10_000, now=NOW)
    verifier.verify(token(), now=NOW)

    assert seen == [expired.value, malformed.value, too_large.value]
    assert [error.reason for error in seen] == ["expired", "malformed", "too-large"]


def test_a_raising_hook_does_not_change_the_outcome(
    cache_mode: dict[str, Any],
    make_verifier: Callable[..., JWTVerifier],
    token: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
):
    def broken_hook(error: TokenRejectedError) -> None:
        raise RuntimeError("metrics backend down")

    verifier = make_verifier(on_reject=broken_hook, **cache_mode)

    with caplog.at_level(logging.ERROR, logger="grelmicro.jwt"):
        with pytest.raises(InvalidSignatureError):
            verifier.verify(tamper(token()), now=NOW)
        with pytest.raises(MalformedTokenError):
            verifier.verify(3, now=NOW)  # type: ignore[arg-type]

    assert [r.getMessage() for r in caplog.records] == ["on_reject hook failed"] * 2


def test_rejections_are_logged_with_the_reason_only(
    cache_mode: dict[str, Any],
    make_verifier: Callable[..., JWTVerifier],
    token: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
):
    verifier = make_verifier(audience="api", **cache_mode)
    tokens = [tamper(token(aud="api")), token(aud="elsewhere"), token(exp=NOW - 5, aud="api")]

    with caplog.at_level(logging.DEBUG, logger="grelmicro.jwt"):
        for text in tokens:
            with pytest.raises(TokenRejectedError):
                verifier.verify(text, now=NOW)

    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "token rejected: signature",
        "token rejected: audience",
        "token rejected: expired",
    ]
    for record in caplog.records:
        assert record.name == "grelmicro.jwt"
        assert record.exc_info is None
        for text in tokens:
            for segment in text.split("."):
                assert segment not in record.getMessage()
                assert all(segment not in str(arg) for arg in record.args or ())


def test_cache_stats_count_hits_and_misses(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier(cache_stats=True, cache_size=8)
    first, second = token(sub="a"), token(sub="b")

    verifier.verify(first, now=NOW)
    verifier.verify(first, now=NOW)
    verifier.verify(first.encode(), now=NOW)
    verifier.verify(second, now=NOW)
    with pytest.raises(ExpiredTokenError):
        verifier.verify(token(exp=NOW - 1), now=NOW)

    assert verifier.cache_info() == CacheInfo(hits=2, misses=3, size=2, max_size=8)


@pytest.mark.parametrize("cache_key", ["digest", "token"])
def test_cache_stats_in_both_key_modes(
    cache_key: str, make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier(cache_stats=True, cache_key=cache_key)
    text = token()

    for _ in range(5):
        verifier.verify(text, now=NOW)

    assert (verifier.cache_info().hits, verifier.cache_info().misses) == (4, 1)


def test_cache_info_without_stats(make_verifier: Callable[..., JWTVerifier]):
    info = make_verifier(cache_size=0).cache_info()

    assert info == CacheInfo(hits=None, misses=None, size=0, max_size=0)


def test_repr_names_policy_not_keys(make_verifier: Callable[..., JWTVerifier]):
    text = repr(make_verifier(audience="api", issuer="https://idp/"))

    assert "HS256" in text
    assert "api" in text
    assert "TOPSECRET" not in text


@pytest.mark.parametrize("cache_size", [0, 16])
def test_a_rejection_leaves_no_reference_cycle(cache_size: int):
    """Refusals are on the hot path of an attack: each must be freed by refcounting alone."""
    # Watched through a weak reference to each error rather than by counting
    # what gc.collect() finds: other tests' server and refresh threads may
    # still be making (their own) cyclic garbage while this runs.
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=cache_size)
    forged = tamper(hmac_key().mint({"exp": NOW + 100}))
    gc.collect()
    gc.disable()
    try:
        for _ in range(200):
            try:
                verifier.verify(forged, now=NOW)
            except TokenRejectedError as exc:
                error = weakref.ref(exc)
            else:
                pytest.fail("a forged token verified")
            assert error() is None  # freed with its traceback by refcounting alone
    finally:
        gc.enable()
