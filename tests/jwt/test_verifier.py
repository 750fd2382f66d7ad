"""JWTVerifier (``_verifier.py``): policy boundaries, inputs, clock, hooks, logging."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Callable
from typing import Any

import pydantic
import pytest
from forge import NOW, SECRET, Signer, hmac_key, nested_array, private_key, tamper, token_of_size
from support import OK, FakeClock, outcome, rejected

from grelmicro.jwt import (
    AlgorithmNotAllowedError,
    Claims,
    ExpiredTokenError,
    InvalidAudienceError,
    InvalidClaimError,
    InvalidIssuerError,
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
    UnsupportedTokenError,
)

# -- policy boundaries ---------------------------------------------------------


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
    # nbf: valid once now >= nbf - max(leeway, leeway_ahead); leeway_ahead 60 by default
    pytest.param({}, {"nbf": NOW}, {}, OK, id="nbf-equals-now"),
    pytest.param({}, {"nbf": NOW + 1}, {}, OK, id="nbf-one-second-ahead"),
    pytest.param({}, {"nbf": NOW + 60}, {}, OK, id="nbf-at-default-allowance"),
    pytest.param(
        {},
        {"nbf": NOW + 61},
        {},
        rejected(TokenNotYetValidError, "not-yet-valid"),
        id="nbf-one-second-past-default-allowance",
    ),
    pytest.param(
        {"leeway_ahead": 0},
        {"nbf": NOW + 1},
        {},
        rejected(TokenNotYetValidError, "not-yet-valid"),
        id="nbf-one-second-ahead-strict",
    ),
    pytest.param({"leeway": 5, "leeway_ahead": 0}, {"nbf": NOW + 5}, {}, OK, id="nbf-at-leeway"),
    pytest.param(
        {"leeway": 5, "leeway_ahead": 0},
        {"nbf": NOW + 6},
        {},
        rejected(TokenNotYetValidError, "not-yet-valid"),
        id="nbf-beyond-leeway",
    ),
    pytest.param({"leeway": 90}, {"nbf": NOW + 90}, {}, OK, id="nbf-at-larger-leeway"),
    # iat: not in the future beyond the same allowance
    pytest.param({}, {"iat": NOW}, {}, OK, id="iat-equals-now"),
    pytest.param({}, {"iat": NOW + 1}, {}, OK, id="iat-one-second-ahead"),
    pytest.param({}, {"iat": NOW + 60}, {}, OK, id="iat-at-default-allowance"),
    pytest.param(
        {},
        {"iat": NOW + 61},
        {},
        rejected(TokenIssuedInFutureError, "issued-in-future"),
        id="iat-one-second-past-default-allowance",
    ),
    pytest.param({"leeway_ahead": 300}, {"iat": NOW + 300}, {}, OK, id="iat-at-leeway-ahead"),
    pytest.param(
        {"leeway_ahead": 300},
        {"iat": NOW + 301},
        {},
        rejected(TokenIssuedInFutureError, "issued-in-future"),
        id="iat-beyond-leeway-ahead",
    ),
    pytest.param(
        {"leeway": 5, "leeway_ahead": 0},
        {"iat": NOW + 6},
        {},
        rejected(TokenIssuedInFutureError, "issued-in-future"),
        id="iat-beyond-leeway",
    ),
    # exp never gets the allowance ahead
    pytest.param(
        {"leeway_ahead": 300},
        {"exp": NOW},
        {},
        rejected(ExpiredTokenError, "expired"),
        id="exp-equals-now-whatever-leeway-ahead",
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
    signer: Signer,
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
def test_max_token_size_boundary(size: int | None, cache_mode: dict[str, Any], signer: Signer):
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
def test_max_depth_boundary(limit: int, cache_mode: dict[str, Any], signer: Signer):
    # The payload object is level 1; a claim holding n nested arrays reaches n + 1.
    verifier = JWTVerifier([Key.secret(SECRET)], max_depth=limit, **cache_mode)
    at_limit = signer.mint({"exp": NOW + 60, "deep": nested_array(limit - 1)})
    over_limit = signer.mint({"exp": NOW + 60, "deep": nested_array(limit)})

    assert isinstance(outcome(verifier, at_limit), Claims)
    assert outcome(verifier, over_limit) == rejected(TokenTooLargeError, "too-large")


def test_max_depth_applies_to_the_header(signer: Signer):
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
    verifier = make_verifier(clock=clock, leeway_ahead=0, **cache_mode)
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


def test_verifier_is_immutable(make_verifier: Callable[..., JWTVerifier]):
    verifier = make_verifier()

    with pytest.raises(AttributeError):
        verifier.verify = lambda *a, **k: None  # type: ignore[method-assign,assignment]
    with pytest.raises(AttributeError):
        verifier.config = JWTConfig()  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        verifier.config.leeway = 100  # type: ignore[misc]


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


def test_rejections_are_logged_with_reason_and_message_never_the_token(
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
    assert [message.split(": ")[:2] for message in messages] == [
        ["token rejected", "signature"],
        ["token rejected", "audience"],
        ["token rejected", "expired"],
    ]
    for record in caplog.records:
        assert record.name == "grelmicro.jwt"
        assert record.exc_info is None
        for text in tokens:
            for segment in text.split("."):
                assert segment not in record.getMessage()
                assert all(segment not in str(arg) for arg in record.args or ())


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
