"""Issue 10, "fail closed, explain clearly": no setting switches a check off
without a word, every caller mistake gets our error with a useful message,
and refusals carry structured context instead of text to parse.
"""

from __future__ import annotations

import contextlib
import json
import logging
import typing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from forge import NOW, SECRET, Signer, b64url, certificate_pem, hmac_key, private_key, private_pem

from grelmicro.jwt import (
    ClaimsRejectedError,
    ConfigurationError,
    ExpiredTokenError,
    InvalidAudienceError,
    InvalidClaimError,
    InvalidIssuerError,
    InvalidKeyError,
    JWTConfig,
    JWTVerifier,
    Key,
    MalformedTokenError,
    MissingClaimError,
    TokenIssuedInFutureError,
    TokenNotYetValidError,
    TokenTooOldError,
    UnknownKeyError,
    _core,
)
from grelmicro.jwt._claims import Claims
from grelmicro.jwt._config import AlgorithmName, CacheKey

FRESH = {"exp": NOW + 60}


def verifier(**settings: Any) -> JWTVerifier:
    return JWTVerifier([Key.secret(SECRET)], **settings)


# -- exp cannot be switched off by accident ----------------------------------------------


@pytest.mark.parametrize("required", [[], ["sub"], "sub", ("sub", "tenant")])
def test_required_adds_to_exp(signer: Signer, required: Any):
    check = verifier(required=required)

    with pytest.raises(MissingClaimError, match="exp"):
        check.verify(signer.mint({"sub": "u", "tenant": "t"}), now=NOW)
    assert "exp" in check.config.required


def test_only_require_exp_false_accepts_a_token_without_exp(signer: Signer):
    check = verifier(require_exp=False, required=["sub"])

    assert check.verify(signer.mint({"sub": "u"}), now=NOW)["sub"] == "u"
    assert check.config.required == ("sub",)


@pytest.mark.parametrize("value", ["no", 0, 1, None.__class__, "false"])
def test_require_exp_takes_a_bool_only(value: Any):
    with pytest.raises(ConfigurationError, match="require_exp"):
        JWTConfig(require_exp=value)


def test_env_required_empty_is_an_error_not_no_exp():
    with pytest.raises(ConfigurationError, match="GRELMICRO_JWT_REQUIRED is empty"):
        JWTConfig.from_env({"GRELMICRO_JWT_REQUIRED": ""})


def test_env_require_exp_false_is_the_named_opt_out(signer: Signer):
    check = JWTVerifier.from_env(
        [Key.secret(SECRET)], environ={"GRELMICRO_JWT_REQUIRE_EXP": "false"}
    )

    assert check.verify(signer.mint({"sub": "u"}), now=NOW)["sub"] == "u"


# -- the environment: blank values and unknown names ------------------------------------


@pytest.mark.parametrize("variable", ["ISSUER", "AUDIENCE", "ALGORITHMS", "TYP", "LEEWAY"])
@pytest.mark.parametrize("value", ["", " ", " , ", "a,,b", ",a"])
def test_env_blank_values_are_errors(variable: str, value: str):
    if variable in {"TYP", "LEEWAY"} and "," in value:
        pytest.skip("not a list setting")

    with pytest.raises(ConfigurationError, match=f"GRELMICRO_JWT_{variable}"):
        JWTConfig.from_env({f"GRELMICRO_JWT_{variable}": value})


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("GRELMICRO_JWT_ISSUERS", "GRELMICRO_JWT_ISSUER"),
        ("GRELMICRO_JWT_AUDIENCES", "GRELMICRO_JWT_AUDIENCE"),
        ("GRELMICRO_JWT_LEWAY", "GRELMICRO_JWT_LEEWAY"),
        ("GRELMICRO_JWT_SECRET_ALGORTIHM", "GRELMICRO_JWT_SECRET_ALGORITHM"),
    ],
)
def test_env_unknown_variable_names_the_closest_setting(variable: str, closest: str):
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env([Key.secret(SECRET)], environ={variable: "TOPSECRET-value"})

    assert variable in str(caught.value)
    assert f"did you mean {closest}?" in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)


def test_env_misspelt_issuer_no_longer_accepts_any_issuer(signer: Signer):
    # Before: ISSUERS was ignored and a token from any issuer verified.
    with pytest.raises(ConfigurationError):
        JWTVerifier.from_env(
            [Key.secret(SECRET)], environ={"GRELMICRO_JWT_ISSUERS": "https://idp/"}
        )


@pytest.mark.parametrize("prefix", ["", None, 5])
def test_env_prefix_must_be_a_non_empty_string(prefix: Any):
    # An empty prefix would make every variable of the process a setting.
    with pytest.raises(ConfigurationError, match="prefix"):
        JWTConfig.from_env({}, prefix=prefix)


def test_env_other_prefixes_are_left_alone():
    assert JWTConfig.from_env({"GRELMICRO_OTHER": "x", "PATH": "/bin"}) == JWTConfig()


# -- flags and settings take their type, nothing that merely looks like it ------------


@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_security_flags_refuse_non_bool(value: Any):
    jwk = {"kty": "oct", "k": b64url(SECRET), "alg": "HS256"}
    builds = [
        lambda: JWTVerifier(jwks={"keys": [jwk]}, allow_symmetric=value),
        lambda: JWTVerifier([Key.secret(SECRET)], cache_stats=value),
        lambda: Key.jwk(jwk, allow_symmetric=value),
        lambda: verifier().rotate(jwks={"keys": [jwk]}, allow_symmetric=value),
        lambda: JWTVerifier.from_env(
            [Key.secret(SECRET)], environ={}, allow_key_material_from_env=value
        ),
    ]
    for build in builds:
        with pytest.raises(ConfigurationError, match="must be True or False"):
            build()


@pytest.mark.parametrize("algorithms", [5, [["HS256"]], [None], {"HS256": 1}.keys(), b"HS256"])
def test_algorithms_of_the_wrong_type_are_configuration_errors(algorithms: Any):
    with pytest.raises(ConfigurationError, match="algorithm"):
        verifier(algorithms=algorithms)


def test_unknown_algorithm_suggests_the_right_case_without_echo():
    with pytest.raises(ConfigurationError, match="did you mean HS256") as caught:
        Key.secret(SECRET, "hs256")  # type: ignore[arg-type]
    assert "hs256" not in str(caught.value)


def test_from_env_passes_constructor_options_through(signer: Signer):
    jwk = {"kty": "oct", "k": b64url(SECRET), "alg": "HS256"}

    check = JWTVerifier.from_env(jwks={"keys": [jwk]}, environ={}, allow_symmetric=True)

    assert check.verify(signer.mint(FRESH), now=NOW)["exp"] == NOW + 60
    with pytest.raises(ConfigurationError, match="did you mean allow_symmetric"):
        JWTVerifier.from_env(jwks={"keys": [jwk]}, environ={}, allow_symetric=True)


def test_leeway_accepts_timedelta_and_refuses_strings(signer: Signer):
    check = verifier(leeway=timedelta(seconds=30))

    assert check.config.leeway == 30.0
    assert check.verify(signer.mint({"exp": NOW - 10}), now=NOW)
    for bad in ("30", "30s", b"30"):
        with pytest.raises(ConfigurationError, match="leeway"):
            verifier(leeway=bad)


def test_config_errors_never_echo_the_input():
    for settings in (
        {"secret": "TOPSECRET-value"},
        {"leeway": "TOPSECRET-value"},
        {"issuer": ["ok", b"TOPSECRET-value"]},
        {"typ": 12345678},
        {"cache_key": "TOPSECRET-value"},
    ):
        with pytest.raises(ConfigurationError) as caught:
            JWTConfig(**settings)
        assert "TOPSECRET" not in str(caught.value)
        assert "12345678" not in str(caught.value)
        assert caught.value.__context__ is None
    with pytest.raises(ConfigurationError) as caught:
        JWTConfig.model_validate({"secret": "TOPSECRET-value"})
    assert "TOPSECRET" not in str(caught.value)


def test_algorithm_and_cache_key_are_literal_types():
    assert set(typing.get_args(AlgorithmName)) == set(_core.algorithms())
    assert set(typing.get_args(CacheKey)) == {"digest", "token"}
    hints = typing.get_type_hints(Key.secret)
    assert hints["algorithm"] == AlgorithmName


# -- numbers that overflow a double --------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        b'{"exp":1e400}',
        b'{"exp":-1e309}',
        b'{"exp":1' + b"0" * 400 + b"}",
        b'{"exp":2000000000,"nbf":-1e309}',
        b'{"exp":2000000000,"iat":1e999}',
        b'{"exp":2000000000,"extra":[1,{"deep":1e400}]}',
        b'{"exp":2000000000,"amount":-1e309}',
    ],
)
def test_non_finite_numbers_are_invalid_claims(
    signer: Signer, payload: bytes, cache_mode: dict[str, Any]
):
    token = signer.mint(payload, header={"alg": "HS256"})

    with pytest.raises(InvalidClaimError):
        verifier(**cache_mode).verify(token, now=NOW)


def test_largest_finite_numbers_still_verify(signer: Signer):
    token = signer.mint(b'{"exp":1e308,"n":-1.7e308}', header={"alg": "HS256"})

    assert verifier().verify(token, now=NOW)["exp"] == 1e308


# -- Key.secret refuses every public-key form -----------------------------------------


def _public_forms() -> dict[str, bytes]:
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    rsa = private_key("RS256").private.public_key()
    ec = private_key("ES256").private.public_key()
    ed = private_key("EdDSA").private.public_key()
    jwk = json.dumps(private_key("RS256").public_jwk())
    der = rsa.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    point = ec.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    openssh = ed.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    forms = {
        "bom-jwk": b"\xef\xbb\xbf" + jwk.encode(),
        "duplicate-member-jwk": jwk[:-1].encode() + b',"e":"AQAB"}',
        "deep-jwks": b"[" * 12 + json.dumps({"keys": [json.loads(jwk)]}).encode() + b"]" * 12,
        "python-repr-jwk": repr(json.loads(jwk)).encode(),
        "hex-der": der.hex().encode(),
        "hex-der-upper-colons": ":".join(f"{b:02X}" for b in der).encode(),
        "openssh-ed25519": openssh + b" user@host",
        "openssh-rsa-authorized-keys": b'from="10.0.0.1" '
        + rsa.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH),
        "openssh-ecdsa-known-hosts": b"host.example.com "
        + ec.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH),
        "raw-ec-point": point,
        "raw-ec-point-without-prefix": point[1:],
        "raw-ec-point-base64url": b64url(point).encode(),
    }
    ssh = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    if hasattr(ssh, "SSHCertificateBuilder"):
        from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415

        certificate = (
            ssh.SSHCertificateBuilder()
            .public_key(ed)
            .serial(1)
            .type(ssh.SSHCertificateType.USER)
            .key_id(b"user")
            .valid_principals([b"user"])
            .valid_before(NOW + 3600)
            .valid_after(NOW)
            .sign(ed25519.Ed25519PrivateKey.generate())
        )
        forms["openssh-certificate"] = certificate.public_bytes() + b" user@host"
    return forms


@pytest.mark.parametrize(
    "form",
    [
        "bom-jwk",
        "duplicate-member-jwk",
        "deep-jwks",
        "python-repr-jwk",
        "hex-der",
        "hex-der-upper-colons",
        "openssh-ed25519",
        "openssh-rsa-authorized-keys",
        "openssh-ecdsa-known-hosts",
        "openssh-certificate",
        "raw-ec-point",
        "raw-ec-point-without-prefix",
        "raw-ec-point-base64url",
    ],
)
def test_public_key_forms_are_not_hmac_secrets(form: str):
    forms = _public_forms()
    if form not in forms:
        pytest.skip("this cryptography cannot build SSH certificates")
    variants: list[str | bytes] = [forms[form]]
    with contextlib.suppress(UnicodeDecodeError):  # binary forms only come as bytes
        variants.append(forms[form].decode("utf-8"))  # the same bytes as str
    for variant in variants:
        with pytest.raises(InvalidKeyError, match="public key"):
            Key.secret(variant, "HS256")


def test_ordinary_secrets_still_build():
    for secret in (SECRET, b"\x04" * 65, b"{" + b"x" * 40 + b"}", b"ab" * 40, b"ssh-" + b"x" * 40):
        assert Key.secret(secret, "HS256").algorithm == "HS256"


# -- Key.pem reads every block --------------------------------------------------------


def test_pem_public_key_then_private_key_is_refused():
    signing = private_key("ES256")

    with pytest.raises(InvalidKeyError, match="private key"):
        Key.pem(signing.public_pem() + private_pem(signing.private), "ES256")


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda a, b: a.public_pem() + b.public_pem(), id="two-public-keys"),
        pytest.param(
            lambda a, b: a.public_pem() + certificate_pem(a.private), id="key-and-certificate"
        ),
        pytest.param(
            lambda a, b: certificate_pem(a.private) + certificate_pem(b.private),
            id="chain-of-two-keys",
        ),
        pytest.param(lambda a, b: a.public_pem() + b"-----BEGIN X-----\n", id="broken-block"),
    ],
)
def test_pem_with_several_blocks_is_refused(build: Any):
    first, second = private_key("ES256"), private_key("ES256", seed=1)
    pytest.importorskip("cryptography")
    other = private_key("ES256", seed=7)
    if first.private is second.private:
        second = other

    with pytest.raises(InvalidKeyError, match="block"):
        Key.pem(build(first, second), "ES256")


def test_pem_certificates_of_one_key_are_accepted():
    signing = private_key("ES256")

    key = Key.pem(
        certificate_pem(signing.private) + certificate_pem(signing.private, "renewed"), "ES256"
    )

    token = signing.mint(FRESH)
    assert JWTVerifier([key]).verify(token, now=NOW)["exp"] == NOW + 60


@pytest.mark.parametrize(
    ("data", "hint"),
    [
        pytest.param("/etc/keys/public.pem", "file path", id="path-str"),
        pytest.param(Path("keys/public.pem"), "file path", id="path-object"),
        pytest.param(b"keys\\public.pem", "file path", id="windows-ish"),
        pytest.param(
            "-----BEGIN PUBLIC KEY-----\\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"
            "\\n-----END PUBLIC KEY-----",
            "literal",
            id="escaped-newlines",
        ),
        pytest.param(
            b"-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
            "signing request",
            id="csr",
        ),
        pytest.param(
            b"-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n",
            "private key",
            id="private-key",
        ),
    ],
)
def test_pem_mistakes_are_named(data: Any, hint: str):
    with pytest.raises(InvalidKeyError, match=hint) as caught:
        Key.pem(data, "ES256")
    assert "MFkw" not in str(caught.value)
    assert "public.pem" not in str(caught.value)


# -- duplicate kids: one rule everywhere, kid-less tokens ----------------------------


def test_duplicate_kid_across_keys_and_jwks_makes_the_kid_unusable(caplog: Any):
    in_code = hmac_key(kid="dup")
    in_jwks = hmac_key(secret=b"J" * 32, kid="dup")
    other = hmac_key(secret=b"O" * 32, kid="other")
    jwks = {"keys": [in_jwks.public_jwk(), other.public_jwk()]}

    with caplog.at_level(logging.WARNING, logger="grelmicro.jwt"):
        check = JWTVerifier([Key.secret(SECRET, kid="dup")], jwks=jwks, allow_symmetric=True)

    for signing in (in_code, in_jwks):
        with pytest.raises(UnknownKeyError):
            check.verify(signing.mint(FRESH), now=NOW)
    assert check.verify(other.mint(FRESH), now=NOW)
    assert "dup" in caplog.text


def test_duplicate_kid_inside_jwks_stays_unusable_when_combined():
    first = hmac_key(secret=b"A" * 32, kid="dup")
    second = hmac_key(secret=b"B" * 32, kid="dup")
    usable = hmac_key(secret=b"U" * 32, kid="u")
    jwks = {"keys": [first.public_jwk(), second.public_jwk(), usable.public_jwk()]}

    check = JWTVerifier(
        [Key.secret(b"C" * 32, kid="c")], jwks=jwks, allow_symmetric=True
    )  # before: the first JWKS entry silently won

    for signing in (first, second):
        with pytest.raises(UnknownKeyError):
            check.verify(signing.mint(FRESH), now=NOW)


def test_duplicate_kid_in_code_and_through_rotate_follow_the_same_rule():
    first, second = hmac_key(secret=b"A" * 32, kid="dup"), hmac_key(secret=b"B" * 32, kid="dup")
    keep = hmac_key(secret=b"K" * 32, kid="keep")
    keys = [Key.secret(b"A" * 32, kid="dup"), Key.secret(b"B" * 32, kid="dup")]

    with pytest.raises(ConfigurationError, match="no usable key"):
        JWTVerifier(keys)
    check = JWTVerifier([*keys, Key.secret(b"K" * 32, kid="keep")])
    check.rotate([*keys, Key.secret(b"K" * 32, kid="keep")])
    for signing in (first, second):
        with pytest.raises(UnknownKeyError):
            check.verify(signing.mint(FRESH), now=NOW)
    assert check.verify(keep.mint(FRESH), now=NOW)


def test_one_key_jwks_verifies_kid_less_tokens():
    signing = hmac_key(secret=b"S" * 32, kid="only")
    check = JWTVerifier(jwks={"keys": [signing.public_jwk()]}, allow_symmetric=True)

    assert check.verify(signing.mint(FRESH, kid=None), now=NOW)

    two = JWTVerifier(
        jwks={"keys": [signing.public_jwk(), hmac_key(secret=b"T" * 32, kid="t").public_jwk()]},
        allow_symmetric=True,
    )
    with pytest.raises(UnknownKeyError):
        two.verify(signing.mint(FRESH, kid=None), now=NOW)


# -- scopes: RFC 6749 §3.3 ----------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "granted"),
    [
        pytest.param("read:items\u00a0admin", set(), id="no-break-space-is-not-a-separator"),
        pytest.param("read:items\tadmin", set(), id="tab-is-not-a-separator"),
        pytest.param("read:items\nadmin", set(), id="newline-is-not-a-separator"),
        pytest.param("read  write", {"read", "write"}, id="double-space"),
        pytest.param('read "admin" a\\b', {"read"}, id="quote-and-backslash-excluded"),
        pytest.param("read caf\u00e9", {"read"}, id="non-ascii-excluded"),
        pytest.param("read:items!#$%&'()*+,-./:;<=>?@[]^_`{|}~", None, id="full-grammar"),
    ],
)
def test_scopes_split_on_space_only(scope: str, granted: set[str] | None):
    claims = Claims({"scope": scope})

    expected = set(scope.split(" ")) if granted is None else granted
    assert claims.scopes == frozenset(expected)
    assert not claims.has_scopes("admin")


def test_scp_list_items_follow_the_grammar():
    assert Claims({"scp": ("read", "bad scope", "admin\u00a0", 3)}).scopes == {"read"}


# -- to_model: a taxonomy error naming fields only -------------------------------------


def test_to_model_failure_names_fields_without_values():
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        sub: int

    with pytest.raises(InvalidClaimError) as caught:
        Claims({"sub": "TOPSECRET-sub", "evil\u2028name": "TOPSECRET-x"}).to_model(Model)

    message = str(caught.value)
    assert "sub" in message
    assert "TOPSECRET" not in message
    assert "\u2028" not in message
    assert caught.value.__context__ is None


# -- caller mistakes on every call: now, Bearer ---------------------------------------


@pytest.mark.parametrize("now", ["2023-11-14", b"1700000000", 10**400, [NOW], None.__class__])
def test_bad_now_is_a_rejection_saying_what_to_pass(
    signer: Signer, cache_mode: dict[str, Any], now: Any
):
    check = verifier(**cache_mode)
    token = signer.mint(FRESH)
    check.verify(token, now=NOW)  # a cached entry must not change the answer

    with pytest.raises(ClaimsRejectedError, match="seconds since the epoch"):
        check.verify(token, now=now)


def test_clock_returning_a_string_is_a_rejection(signer: Signer, cache_mode: dict[str, Any]):
    check = JWTVerifier([Key.secret(SECRET)], clock=lambda: "now", **cache_mode)

    with pytest.raises(ClaimsRejectedError, match="seconds since the epoch"):
        check.verify(signer.mint(FRESH))


@pytest.mark.parametrize("scheme", ["Bearer ", "bearer ", "DPoP "])
def test_authorization_scheme_is_named(signer: Signer, cache_mode: dict[str, Any], scheme: str):
    token = signer.mint(FRESH)

    with pytest.raises(MalformedTokenError, match="without the scheme") as caught:
        verifier(**cache_mode).verify(scheme + token, now=NOW)
    assert token[:20] not in str(caught.value)


def test_unverified_header_names_the_scheme_too(signer: Signer):
    from grelmicro.jwt import unverified_header  # noqa: PLC0415

    with pytest.raises(MalformedTokenError, match="without the scheme"):
        unverified_header("Bearer " + signer.mint(FRESH))


# -- structured context ----------------------------------------------------------------


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def test_expired_carries_datetimes_and_iso_message(signer: Signer):
    check = verifier(leeway=5)

    with pytest.raises(ExpiredTokenError) as caught:
        check.verify(signer.mint({"exp": NOW - 100}), now=NOW)

    error = caught.value
    assert error.expires_at == _at(NOW - 100)
    assert error.now == _at(NOW)
    assert error.leeway == timedelta(seconds=5)
    assert "2023-11-14T22:11:40Z" in str(error)
    assert "2023-11-14T22:13:20Z" in str(error)
    assert str(NOW) not in str(error)


def test_other_time_refusals_carry_their_times(signer: Signer):
    with pytest.raises(TokenNotYetValidError) as nbf:
        verifier().verify(signer.mint({**FRESH, "nbf": NOW + 90}), now=NOW)
    assert nbf.value.not_before == _at(NOW + 90)
    assert nbf.value.now == _at(NOW)
    # The allowance applied ahead of now (leeway_ahead's default), not leeway's 0.
    assert nbf.value.leeway == timedelta(seconds=60)
    assert "(now 2023-11-14T22:13:20Z, leeway ahead 60s)" in str(nbf.value)

    with pytest.raises(TokenIssuedInFutureError) as iat:
        verifier(leeway=5, leeway_ahead=0).verify(signer.mint({**FRESH, "iat": NOW + 30}), now=NOW)
    assert iat.value.issued_at == _at(NOW + 30)
    assert iat.value.leeway == timedelta(seconds=5)

    with pytest.raises(TokenTooOldError) as old:
        verifier(max_age=60).verify(signer.mint({**FRESH, "iat": NOW - 100}), now=NOW)
    assert old.value.issued_at == _at(NOW - 100)
    assert old.value.max_age == timedelta(seconds=60)


def test_issuer_and_audience_errors_carry_the_expected_values(signer: Signer):
    check = verifier(issuer=["https://a/", "https://b/"], audience="api")

    with pytest.raises(InvalidIssuerError) as issuer:
        check.verify(signer.mint({**FRESH, "iss": "https://evil/", "aud": "api"}), now=NOW)
    assert issuer.value.expected == ("https://a/", "https://b/")
    # What the token said is shown quoted (escaped, capped), beside what was
    # expected, so a mismatch can be fixed (issue 22).
    assert '"https://evil/", expected "https://a/", "https://b/"' in str(issuer.value)

    with pytest.raises(InvalidAudienceError) as audience:
        check.verify(signer.mint({**FRESH, "iss": "https://a/", "aud": "other"}), now=NOW)
    assert audience.value.expected == ("api",)

    with pytest.raises(InvalidAudienceError) as unexpected:
        verifier().verify(signer.mint({**FRESH, "aud": "api"}), now=NOW)
    assert unexpected.value.expected == ()


def test_unknown_key_carries_the_kid_capped_and_escaped():
    check = JWTVerifier([Key.secret(SECRET, kid="k1")])
    kid = "\x1b[31mevil\u2028" + "x" * 500

    with pytest.raises(UnknownKeyError) as caught:
        check.verify(hmac_key(kid=kid).mint(FRESH), now=NOW)

    error = caught.value
    assert error.kid is not None
    assert error.kid.startswith("\\x1b[31mevil\\u2028x")
    assert error.kid.isascii()
    assert len(error.kid) <= 150
    assert "evil" not in str(error)
    assert "evil" not in repr(error.args)


def test_claim_errors_name_the_claim(signer: Signer):
    with pytest.raises(MissingClaimError) as absent:
        verifier(required=["tenant"]).verify(signer.mint(FRESH), now=NOW)
    assert absent.value.claim == "tenant"

    with pytest.raises(MissingClaimError) as no_exp:
        verifier().verify(signer.mint({"sub": "u"}), now=NOW)
    assert no_exp.value.claim == "exp"

    with pytest.raises(InvalidClaimError) as wrong:
        verifier().verify(signer.mint({"exp": str(NOW + 60)}), now=NOW)
    assert wrong.value.claim == "exp"


def test_escape_helper_caps_and_escapes():
    assert _core.escape("a\nb\u00e9", limit=3) == "a\\nb"
    assert _core.escape("plain") == "plain"
