"""The error taxonomy: hierarchy, reasons, HTTP answers, and what messages never say."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from forge import NOW, SECRET, Signer, hmac_key, nested_array, private_key, tamper

from grelmicro.jwt import JWTConfig, JWTVerifier, Key, errors
from grelmicro.jwt.errors import (
    ConfigurationError,
    InvalidAudienceError,
    InvalidIssuerError,
    JWTError,
    KeysUnavailableError,
    TokenRejectedError,
)

ERROR_CLASSES: list[type[JWTError]] = [
    getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)
]
REJECTIONS = [cls for cls in ERROR_CLASSES if issubclass(cls, TokenRejectedError)]
KEBAB = re.compile(r"^[a-z]+(-[a-z]+)*$")

#: Text an attacker controls, placed in every header member and claim that can fail.
MARK = "ATTACKER-CONTROLLED-TEXT"


def test_every_public_error_derives_from_jwt_error():
    assert ERROR_CLASSES
    for cls in ERROR_CLASSES:
        assert issubclass(cls, JWTError)
        assert issubclass(cls, Exception)


def test_configuration_errors_are_value_errors():
    # Code that validates settings often catches ValueError; build errors stay catchable.
    for cls in ERROR_CLASSES:
        if issubclass(cls, ConfigurationError):
            assert issubclass(cls, ValueError)


def test_rejections_and_service_errors_are_separate_families():
    assert not issubclass(KeysUnavailableError, TokenRejectedError)
    assert not issubclass(ConfigurationError, TokenRejectedError)
    assert not issubclass(TokenRejectedError, ConfigurationError)


def test_every_rejection_has_a_distinct_reason():
    reasons = [cls.reason for cls in REJECTIONS]

    assert len(reasons) == len(set(reasons)), reasons
    assert len(REJECTIONS) >= 11


def test_every_error_class_has_a_distinct_kebab_case_reason():
    reasons = [cls.reason for cls in ERROR_CLASSES]

    assert len(reasons) == len(set(reasons)), reasons
    for reason in reasons:
        assert KEBAB.match(reason), reason


@pytest.mark.parametrize(
    ("reason", "family"),
    [
        ("malformed", "MalformedTokenError"),
        ("signature", "InvalidSignatureError"),
        ("algorithm", "AlgorithmNotAllowedError"),
        ("unknown-key", "UnknownKeyError"),
        ("expired", "ExpiredTokenError"),
        ("not-yet-valid", "TokenNotYetValidError"),
        ("audience", "InvalidAudienceError"),
        ("issuer", "InvalidIssuerError"),
        ("missing-claim", "MissingClaimError"),
        ("type", "InvalidTokenTypeError"),
        ("too-large", "TokenTooLargeError"),
    ],
)
def test_the_documented_reasons_exist(reason: str, family: str):
    """design.md §5 names these reasons; they are a stable, public vocabulary."""
    cls = getattr(errors, family)

    assert issubclass(cls, TokenRejectedError)
    assert cls.reason == reason
    assert errors.REASONS[reason] is cls


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_docstring_says_the_http_answer(cls: type[JWTError]):
    doc = inspect.getdoc(cls) or ""

    if issubclass(cls, TokenRejectedError):
        assert "401" in doc
    elif issubclass(cls, KeysUnavailableError):
        assert "503" in doc
    elif issubclass(cls, ConfigurationError):
        assert re.search(r"build|start", doc, re.IGNORECASE), doc
    else:
        assert re.search(r"HTTP|401|503", doc), doc


def test_message_property(token: Callable[..., str], make_verifier: Callable[..., JWTVerifier]):
    with pytest.raises(TokenRejectedError) as caught:
        make_verifier().verify(token(exp=NOW - 1), now=NOW)

    assert caught.value.message == str(caught.value)
    assert caught.value.message.startswith("token expired")
    assert JWTError().message == ""


# -- messages never carry token bytes, signatures or key material -----------------------


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack += [current.__cause__, current.__context__]


def forbidden_fragments(token: str) -> list[str]:
    """Pieces of the token and key that must never appear in an error or log."""
    fragments = [SECRET.decode(), SECRET.decode()[:12], MARK]
    for segment in token.split("."):
        if len(segment) >= 8:
            fragments += [segment, segment[:16], segment[-16:]]
    return fragments


signer = hmac_key(kid="k1")


def mint(claims: dict[str, Any], **header: Any) -> str:
    return signer.mint({"exp": NOW + 60, **claims}, **header)


REJECTED_TOKENS = [
    pytest.param({}, lambda: "x" * 9000, id="too-large"),
    pytest.param({}, lambda: mint({}).replace(".", "..", 1), id="malformed-segments"),
    pytest.param({}, lambda: mint({"p": MARK})[:-3] + "!!!", id="malformed-base64"),
    pytest.param(
        {},
        lambda: signer.mint(
            b'{"exp":1,' + MARK.encode() + b"}", header=b'{"alg":"HS256","kid":"k1"}'
        ),
        id="malformed-json",
    ),
    pytest.param(
        {},
        lambda: signer.mint(
            b'{"a":"' + MARK.encode() + b'","a":"x"}', header=b'{"alg":"HS256","kid":"k1"}'
        ),
        id="duplicate-member",
    ),
    pytest.param({}, lambda: mint({}, crit=[MARK], **{MARK: 1}), id="unsupported-crit"),
    pytest.param({}, lambda: mint({}, alg=MARK), id="algorithm-unknown"),
    pytest.param({}, lambda: mint({}, alg="HS512"), id="algorithm-mismatch"),
    pytest.param({}, lambda: hmac_key(kid=MARK).mint({"exp": NOW + 60}), id="unknown-kid"),
    pytest.param({}, lambda: tamper(mint({"sub": MARK})), id="signature"),
    pytest.param(
        {},
        lambda: hmac_key(secret=b"other" * 8, kid="k1").mint({"exp": NOW + 60}),
        id="wrong-key",
    ),
    pytest.param({}, lambda: mint({"exp": NOW - 1, "sub": MARK}), id="expired"),
    pytest.param({}, lambda: mint({"nbf": NOW + 90}), id="not-yet-valid"),
    pytest.param({}, lambda: mint({"iat": NOW + 90}), id="issued-in-future"),
    pytest.param({"max_age": 10}, lambda: mint({"iat": NOW - 60}), id="too-old"),
    pytest.param({"audience": "api"}, lambda: mint({"aud": MARK}), id="audience"),
    pytest.param({"issuer": "idp"}, lambda: mint({"iss": MARK}), id="issuer"),
    pytest.param({"required": ["exp", "sub"]}, lambda: mint({}), id="missing-claim"),
    pytest.param({}, lambda: mint({"sub": [MARK]}), id="invalid-claim"),
    pytest.param({}, lambda: mint({"exp": MARK}), id="invalid-exp"),
    pytest.param({"typ": "at+jwt"}, lambda: mint({}, typ=MARK), id="type"),
    pytest.param({"max_depth": 4}, lambda: mint({"d": nested_array(10)}), id="too-deep"),
]


@pytest.mark.parametrize("cache_size", [0, 64])
@pytest.mark.parametrize(("settings", "build"), REJECTED_TOKENS)
def test_rejections_never_quote_token_or_key(
    settings: dict[str, Any],
    build: Callable[[], str],
    cache_size: int,
    caplog: pytest.LogCaptureFixture,
):
    verifier = JWTVerifier([Key.secret(SECRET, kid="k1")], cache_size=cache_size, **settings)
    token = build()
    hooked: list[TokenRejectedError] = []
    verifier_with_hook = JWTVerifier(
        [Key.secret(SECRET, kid="k1")],
        cache_size=cache_size,
        on_reject=hooked.append,
        **settings,
    )

    with caplog.at_level(logging.DEBUG, logger="grelmicro.jwt"):
        with pytest.raises(TokenRejectedError) as caught:
            verifier.verify(token, now=NOW)
        with pytest.raises(TokenRejectedError):
            verifier_with_hook.verify(token.encode(), now=NOW)

    texts = []
    for exc in [*exception_chain(caught.value), *hooked]:
        texts += [str(exc), repr(exc), *(str(arg) for arg in exc.args)]
    texts += [record.getMessage() for record in caplog.records]
    fragments = forbidden_fragments(token)
    if isinstance(caught.value, (InvalidIssuerError, InvalidAudienceError)):
        # By design (issue 22): an issuer or audience refusal shows what the
        # token said, quoted, escaped and capped; never the token itself.
        assert f'"{MARK}"' in str(caught.value)
        fragments.remove(MARK)
    for fragment in fragments:
        for text in texts:
            assert fragment not in text, (fragment, text)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Key.secret(SECRET[:20]), id="short-secret"),
        pytest.param(lambda: Key.secret(SECRET, "ES256"), id="secret-for-ec"),
        pytest.param(lambda: Key.secret(SECRET.decode(), "HS256", kid=b"k"), id="kid-bytes"),
        pytest.param(lambda: Key.pem(SECRET, "RS256"), id="secret-as-pem"),
        pytest.param(lambda: Key.jwk(SECRET), id="secret-as-jwk"),
        pytest.param(
            lambda: Key.jwk({"kty": "oct", "k": SECRET.decode()}, "HS256", allow_symmetric=True),
            id="secret-in-jwk-k",
        ),
        pytest.param(
            lambda: Key.jwk({"kty": "RSA", "n": SECRET.decode(), "e": "AQAB"}), id="rsa-jwk-n"
        ),
        pytest.param(lambda: JWTVerifier(jwks=SECRET), id="secret-as-jwks"),
        pytest.param(
            lambda: JWTVerifier(jwks={"keys": [{"kty": "oct", "k": SECRET.decode()}]}),
            id="oct-in-jwks",
        ),
        pytest.param(
            lambda: JWTVerifier.from_env(environ={"GRELMICRO_JWT_SECRET": SECRET.decode()}),
            id="env-secret-refused",
        ),
        pytest.param(
            lambda: JWTVerifier.from_env(
                environ={"GRELMICRO_JWT_SECRET": SECRET.decode()[:20]},
                allow_key_material_from_env=True,
            ),
            id="env-secret-weak",
        ),
        pytest.param(
            lambda: JWTVerifier.from_env(
                environ={"GRELMICRO_JWT_JWKS": SECRET.decode()}, allow_key_material_from_env=True
            ),
            id="env-jwks-garbage",
        ),
        pytest.param(
            lambda: JWTVerifier.from_env(
                environ={
                    "GRELMICRO_JWT_PUBLIC_KEY": SECRET.decode(),
                    "GRELMICRO_JWT_PUBLIC_KEY_ALGORITHM": "RS256",
                },
                allow_key_material_from_env=True,
            ),
            id="env-pem-garbage",
        ),
        # A secret passed where the algorithm goes (arguments swapped) is still a secret.
        pytest.param(lambda: Key.secret("HS256", SECRET.decode()), id="swapped-secret-args"),
        pytest.param(lambda: JWTConfig.build(algorithms=[SECRET.decode()]), id="secret-as-alg"),
    ],
)
def test_configuration_errors_never_echo_key_material(
    build: Callable[[], object], caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.DEBUG, logger="grelmicro.jwt"):
        with pytest.raises(ConfigurationError) as caught:
            build()

    texts = [str(exc) for exc in exception_chain(caught.value)]
    texts += [repr(exc) for exc in exception_chain(caught.value)]
    texts += [record.getMessage() for record in caplog.records]
    for text in texts:
        assert "TOPSECRET" not in text, text
        assert SECRET.decode()[-16:] not in text, text


def test_rsa_key_material_never_echoed():
    rsa = private_key("RS256")
    pem = rsa.public_pem()
    body = b"".join(pem.splitlines()[1:-1]).decode()

    with pytest.raises(ConfigurationError) as caught:
        Key.pem(pem, "ES256")  # right PEM, wrong algorithm

    for exc in exception_chain(caught.value):
        assert body[20:60] not in str(exc)
        assert body[-40:] not in str(exc)


def test_translated_errors_do_not_chain_the_core_error_visibly(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    """Tracebacks show our error only (``raise ... from None``)."""
    for settings in ({"cache_size": 0}, {"cache_key": "digest"}, {"cache_key": "token"}):
        verifier = make_verifier(**settings)
        with pytest.raises(TokenRejectedError) as caught:
            verifier.verify(tamper(token()), now=NOW)
        assert caught.value.__cause__ is None
        assert caught.value.__suppress_context__ or caught.value.__context__ is None


def test_signature_failures_say_nothing_beyond_their_kind(asymmetric: Signer):
    verifier = JWTVerifier([Key.pem(asymmetric.public_pem(), asymmetric.alg)])

    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(tamper(asymmetric.mint({"exp": NOW + 60})), now=NOW)

    assert caught.value.reason == "signature"
    assert str(caught.value) == "signature verification failed"


def test_reasons_table_names_every_error_class_once() -> None:
    assert sorted(errors.REASONS.values(), key=lambda c: c.__name__) == sorted(
        ERROR_CLASSES, key=lambda c: c.__name__
    )
    assert all(errors.REASONS[cls.reason] is cls for cls in ERROR_CLASSES)
    with pytest.raises(TypeError):
        errors.REASONS["expired"] = JWTError  # type: ignore[index]


# -- an algorithm refusal says who refused which algorithm ------------------------------


LONG_SECRET = SECRET * 2  # 64 bytes or more: long enough for HS512


@pytest.mark.parametrize(
    ("algorithms", "alg", "refused_by", "message"),
    [
        pytest.param(
            ["HS256"],
            "RS256",
            "policy",
            "token alg RS256 is not allowed by this verifier (not in its algorithms)",
            id="not-in-the-allow-list",
        ),
        pytest.param(
            ["HS256", "HS512"],
            "HS512",
            "keys",
            "no key serves HS512, the token's alg",
            id="allowed-but-no-key",
        ),
        pytest.param(
            None, "ES256", "keys", "no key serves ES256, the token's alg", id="keys-own-list"
        ),
    ],
)
def test_an_algorithm_refusal_says_whether_the_policy_or_the_keys_refused(
    algorithms: list[str] | None, alg: str, refused_by: str, message: str
) -> None:
    verifier = JWTVerifier([Key.secret(SECRET, kid="k1")], algorithms=algorithms)

    with pytest.raises(errors.AlgorithmNotAllowedError) as caught:
        verifier.verify(mint({}, alg=alg), now=NOW)

    assert caught.value.reason == "algorithm"
    assert caught.value.refused_by == refused_by
    assert caught.value.algorithm == alg
    assert str(caught.value) == message
    # The token's kid names the key held: said on a keys' refusal only.
    assert caught.value.kid == ("k1" if refused_by == "keys" else None)


def test_a_kid_naming_a_key_of_another_algorithm_is_the_keys_refusal() -> None:
    verifier = JWTVerifier(
        [Key.secret(SECRET, "HS256", kid="k1"), Key.secret(LONG_SECRET, "HS512", kid="k2")]
    )

    with pytest.raises(errors.AlgorithmNotAllowedError) as caught:
        verifier.verify(mint({}, alg="HS512"), now=NOW)

    assert (caught.value.refused_by, caught.value.algorithm) == ("keys", "HS512")
    assert caught.value.kid == "k1"
    assert "HS512" in str(caught.value)


def test_an_unsupported_alg_is_an_escaped_capped_attribute_never_in_the_message() -> None:
    verifier = JWTVerifier([Key.secret(SECRET, kid="k1")])
    alg = "\u00e9\n" + MARK * 20

    with pytest.raises(errors.AlgorithmNotAllowedError) as caught:
        verifier.verify(mint({}, alg=alg), now=NOW)

    assert caught.value.refused_by is None
    # Capped to 128 bytes by the core ("é" is two), escaped here.
    assert caught.value.algorithm == "\\xe9\\n" + (MARK * 20)[:125]
    assert MARK not in str(caught.value)
    assert MARK not in repr(caught.value)
