"""Leakage: refusals never carry tokens, signatures or key material.

Attack class: a refusal that quotes what it refused ends up in logs, error
trackers and HTTP responses, which turns them into a store of replayable
bearer tokens or, worse, of secrets. Checked for every rejection reason and
every build-time refusal: ``str``, ``repr``, ``args``, the formatted
traceback, the whole ``__cause__``/``__context__`` chain, notes, the
``on_reject`` hook's view, and every log record at DEBUG.

References:
- CWE-209 (error message containing sensitive information), CWE-532
  (sensitive information in a log file), CWE-200;
- RFC 6750 §5.2-5.3 (bearer token disclosure: whoever holds it can use it);
- RFC 8725 §3.10; design.md §4 ("a rejection never quotes the token, its
  signature or key material; claim failures may carry the times involved").
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import forge
import pytest
from support import NOW, key_for, reject

from grelmicro.jwt import JWTError, JWTVerifier, Key, TokenRejectedError

# Distinctive material: any appearance in output is a leak, not a coincidence.
SECRET = b"CANARY-SECRET-4f1c9a7e-b2d6-48e3-9c5a-01d7e6f3a2b8"
SUB = "CANARY-SUBJECT-8e2f"
AUD = "CANARY-AUDIENCE-71ab"
ISS = "CANARY-ISSUER-c3d9"
KID = "CANARY-KID-5a5a"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def _texts(exc: BaseException) -> list[str]:
    out = ["".join(traceback.format_exception(exc))]
    for item in _chain(exc):
        out += [str(item), repr(item), repr(item.args)]
        out += [str(note) for note in getattr(item, "__notes__", [])]
        if isinstance(item, JWTError):
            out.append(item.message)
    return out


def _needles(token: str) -> list[str]:
    """Every form in which a token or its parts could be quoted."""
    parts = token.split(".")
    sig = parts[-1]
    raw_sig = forge.unb64url(sig) if forge.canonical(sig) else b""
    needles = [token, *parts, ".".join(parts[:2])] + [p[:16] for p in parts]
    if raw_sig:
        needles += [raw_sig.hex(), base64.b64encode(raw_sig).decode(), repr(raw_sig)[2:20]]
    return [n for n in needles if len(n) >= 8]


def _secret_needles() -> list[str]:
    return [
        SECRET.decode(),
        SECRET.hex(),
        forge.b64url(SECRET),
        base64.b64encode(SECRET).decode(),
        "CANARY-SECRET",
    ]


def _assert_clean(texts: list[str], needles: list[str]) -> None:
    for text in texts:
        for needle in needles:
            assert needle not in text, f"leaked {needle[:24]!r}... in {text[:200]!r}"


def _mint(body: dict[str, Any], header: Any = None, key: bytes = SECRET) -> str:
    return forge.mint(header or {"alg": "HS256", "kid": KID}, body, key, "HS256")


def _good_body(**extra: Any) -> dict[str, Any]:
    return {"sub": SUB, "aud": AUD, "iss": ISS, "exp": NOW + 3600, **extra}


def _cases() -> list[tuple[str, str]]:
    attacker = b"CANARY-ATTACKER-SECRET-000000000000"
    return [
        ("signature", _mint(_good_body(), key=attacker)),
        ("expired", _mint(_good_body(exp=NOW - 5))),
        ("not-yet-valid", _mint(_good_body(nbf=NOW + 500))),
        ("issued-in-future", _mint(_good_body(iat=NOW + 500))),
        ("audience", _mint(_good_body(aud="CANARY-OTHER-AUDIENCE"))),
        ("issuer", _mint(_good_body(iss="CANARY-OTHER-ISSUER"))),
        ("missing-claim", _mint({"sub": SUB, "aud": AUD, "iss": ISS})),
        ("invalid-claim", _mint(_good_body(exp="CANARY-NOT-A-NUMBER"))),
        ("malformed", _mint(_good_body(), header=b'{"alg":"HS256","kid":"' + KID.encode() + b'"')),
        (
            "malformed",
            _mint({"sub": SUB, "sub2": SUB, "exp": NOW + 1, "dup": 1, "dup ": 1}).replace(
                ".", "!", 1
            ),
        ),
        ("algorithm", _mint(_good_body(), header={"alg": "CANARY-ALG", "kid": KID})),
        ("unknown-key", _mint(_good_body(), header={"alg": "HS256", "kid": "CANARY-OTHER-KID"})),
        (
            "unsupported",
            _mint(_good_body(), header={"alg": "HS256", "kid": KID, "crit": ["CANARY-EXT"]}),
        ),
        ("type", _mint(_good_body(), header={"alg": "HS256", "kid": KID, "typ": "CANARY-TYPE"})),
        ("too-old", _mint(_good_body(iat=NOW - 10_000))),
        ("too-large", _mint(_good_body(pad="CANARY-PAD" * 1000))),
    ]


def _verifier(reason: str, **options: Any) -> JWTVerifier:
    options.setdefault("audience", AUD)
    options.setdefault("issuer", ISS)
    if reason == "type":
        options["typ"] = "at+jwt"
    if reason == "too-old":
        options["max_age"] = 60
    return JWTVerifier(keys=[Key.secret(SECRET, "HS256", kid=KID)], **options)


CASES = _cases()


@pytest.mark.parametrize("mode", ["uncached", "digest", "token"])
@pytest.mark.parametrize(
    ("reason", "token"), CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(CASES)]
)
def test_rejections_quote_nothing(
    caplog: pytest.LogCaptureFixture, reason: str, token: str, mode: str
) -> None:
    options = {
        "uncached": {"cache_size": 0},
        "digest": {"cache_key": "digest"},
        "token": {"cache_key": "token"},
    }[mode]
    hooked: list[TokenRejectedError] = []
    verifier = _verifier(reason, on_reject=hooked.append, **options)
    with caplog.at_level(logging.DEBUG):
        error = reject(verifier, token, reason)
        reject(verifier, token.encode(), reason)
    texts = _texts(error) + [r.getMessage() for r in caplog.records]
    texts += [caplog.text] + [t for e in hooked for t in _texts(e)]
    needles = _needles(token) + _secret_needles() + [SUB]
    if reason in {"audience", "issuer"}:
        # By design (issue 22): these refusals name the configured value and
        # what the token said, each quoted, escaped and capped, to let a user
        # fix a mismatch; nothing else of the token.
        claim = {"audience": AUD, "issuer": ISS}[reason]
        assert f'expected "{claim}"' in str(error)
        assert f'"CANARY-OTHER-{reason.upper()}"' in str(error)
    else:
        needles += [AUD, ISS, "CANARY-OTHER"]
    if reason not in {"unknown-key", "algorithm", "unsupported", "type"}:
        needles.append(KID)
    needles += [
        "CANARY-ALG",
        "CANARY-EXT",
        "CANARY-TYPE",
        "CANARY-PAD",
        "CANARY-NOT",
    ]
    _assert_clean(texts, needles)
    assert hooked, "on_reject hook not called"


def test_time_claim_failures_carry_only_times() -> None:
    verifier = _verifier("expired", cache_size=0)
    error = reject(verifier, _mint(_good_body(exp=NOW - 5)), "expired")
    # ISO times in the message, datetimes as attributes (issue 10).
    expires = datetime.datetime.fromtimestamp(NOW - 5, tz=datetime.timezone.utc)
    assert expires.isoformat().replace("+00:00", "Z") in str(error)
    assert error.expires_at == expires  # type: ignore[attr-defined]


def test_token_values_are_attributes_only_capped_and_escaped() -> None:
    verifier = JWTVerifier(keys=[Key.secret(SECRET, "HS256", kid="real")], cache_size=0)
    kid = "CANARY-KID\x1b]8;;http://evil\x07\u202e" + "K" * 5000
    error = reject(verifier, _mint(_good_body(), {"alg": "HS256", "kid": kid}), "unknown-key")
    _assert_clean(_texts(error), ["CANARY-KID", "evil"])
    carried = error.kid  # type: ignore[attr-defined]
    assert carried.startswith("CANARY-KID\\x1b]8;;http://evil\\x07\\u202e")
    assert carried.isascii()
    assert carried.isprintable()
    assert len(carried) < 200


def test_configuration_errors_quote_no_input() -> None:
    from grelmicro.jwt import ConfigurationError, JWTConfig  # noqa: PLC0415

    for settings in (
        {"secret": SECRET.decode()},
        {"leeway": SECRET.decode()},
        {"algorithms": [SECRET.decode()]},
        {"issuer": [SECRET]},
        {"cache_key": SECRET.decode()},
    ):
        with pytest.raises(ConfigurationError) as caught:
            JWTConfig(**settings)
        _assert_clean(_texts(caught.value), _secret_needles())
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env(environ={"GRELMICRO_JWT_ISSUERS": SECRET.decode()}, keys=None)
    _assert_clean(_texts(caught.value), _secret_needles())


def test_to_model_failures_quote_no_claim() -> None:
    import pydantic  # noqa: PLC0415

    class Model(pydantic.BaseModel):
        sub: int
        aud: int

    claims = JWTVerifier(keys=[Key.secret(SECRET, "HS256", kid=KID)], audience=AUD).verify(
        _mint(_good_body()), now=NOW
    )
    with pytest.raises(TokenRejectedError) as caught:
        claims.to_model(Model)
    assert caught.value.reason == "invalid-claim"
    assert "sub" in str(caught.value)
    _assert_clean(_texts(caught.value), [SUB, AUD, ISS])


def test_cli_never_echoes_a_secret_given_in_place_of_a_variable_name() -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    result = subprocess.run(
        [sys.executable, "-m", "grelmicro.jwt", "verify", "a.b.c", "--secret-env", SECRET.decode()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    _assert_clean([result.stdout, result.stderr], _secret_needles())


def test_failing_hook_is_logged_without_the_token(caplog: pytest.LogCaptureFixture) -> None:
    token = _mint(_good_body(), key=b"CANARY-ATTACKER-SECRET-000000000000")

    def hook(error: TokenRejectedError) -> None:
        raise RuntimeError("metrics backend down")

    verifier = _verifier("signature", on_reject=hook)
    with caplog.at_level(logging.DEBUG):
        error = reject(verifier, token, "signature")
    assert any("on_reject" in r.getMessage() for r in caplog.records)
    _assert_clean([*_texts(error), caplog.text], _needles(token) + _secret_needles())


def _jwk_material(ring: forge.KeyRing) -> list[str]:
    private = forge.private_jwk(ring.rsa)
    values = [private[m] for m in ("n", "d", "p", "q", "dp", "dq", "qi")]
    ec = forge.private_jwk(ring.p256)
    values += [ec["x"], ec["y"], ec["d"]]
    return [v[:24] for v in values]


def _pem_lines(pem: bytes) -> list[str]:
    return [line.decode() for line in pem.splitlines() if line and not line.startswith(b"-----")][
        :6
    ]


def _build_failures(ring: forge.KeyRing) -> list[tuple[str, Callable[[], Any], list[str]]]:
    rsa_pem = forge.spki_pem(ring.rsa.public_key())
    private_pem = forge.private_pem(ring.rsa)
    short = b"CANARY-SHORT-SECRET"
    return [
        ("short-secret", lambda: Key.secret(short, "HS256"), [short.decode(), short.hex()]),
        ("short-secret-str", lambda: Key.secret(short.decode(), "HS512"), [short.decode()]),
        ("pem-as-secret", lambda: Key.secret(rsa_pem, "HS256"), _pem_lines(rsa_pem)),
        ("private-pem", lambda: Key.pem(private_pem, "RS256"), _pem_lines(private_pem)),
        ("private-jwk", lambda: Key.jwk(forge.private_jwk(ring.rsa)), _jwk_material(ring)),
        ("private-ec-jwk", lambda: Key.jwk(forge.private_jwk(ring.p256)), _jwk_material(ring)),
        ("oct-jwk", lambda: Key.jwk(forge.oct_jwk(SECRET)), _secret_needles()),
        (
            "short-oct-jwk",
            lambda: Key.jwk(forge.oct_jwk(short), allow_symmetric=True),
            [forge.b64url(short)],
        ),
        ("secret-as-algorithm", lambda: Key.secret(SECRET, SECRET.decode()), _secret_needles()),
        (
            "secret-in-algorithms",
            lambda: JWTVerifier(keys=[Key.secret(SECRET, "HS256")], algorithms=[SECRET.decode()]),
            _secret_needles(),
        ),
        (
            "secret-as-audience-type",
            lambda: JWTVerifier(keys=[Key.secret(SECRET, "HS256")], leeway=SECRET.decode()),
            _secret_needles(),
        ),
        ("secret-as-kid-type", lambda: Key.secret(SECRET, "HS256", kid=SECRET), _secret_needles()),
        (
            "bad-jwks",
            lambda: JWTVerifier(jwks={"keys": [forge.oct_jwk(SECRET)]}),
            _secret_needles(),
        ),
        ("jwks-not-json", lambda: JWTVerifier(jwks=SECRET + b"{"), _secret_needles()),
        (
            "bad-pem",
            lambda: Key.pem(
                b"-----BEGIN PUBLIC KEY-----\n" + SECRET + b"\n-----END PUBLIC KEY-----\n", "RS256"
            ),
            _secret_needles(),
        ),
    ]


def test_build_time_refusals_quote_no_key_material(
    ring: forge.KeyRing, caplog: pytest.LogCaptureFixture
) -> None:
    checked = 0
    for name, build, needles in _build_failures(ring):
        with caplog.at_level(logging.DEBUG):
            try:
                build()
            except JWTError as exc:
                texts = [*_texts(exc), caplog.text]
            else:
                raise AssertionError(f"{name}: was accepted")
        for text in texts:
            for needle in needles:
                assert needle not in text, f"{name}: leaked {needle[:20]!r} in {text[:200]!r}"
        checked += 1
        caplog.clear()
    assert checked == len(_build_failures(ring))


def test_skipped_jwks_keys_are_logged_without_material(
    ring: forge.KeyRing, caplog: pytest.LogCaptureFixture
) -> None:
    document = {
        "keys": [
            forge.jwk(ring.p256.public_key(), kid="good"),
            forge.private_jwk(ring.rsa, kid="private"),
            forge.oct_jwk(SECRET, kid="symmetric"),
            forge.private_jwk(ring.p384, kid="private-ec"),
        ]
    }
    with caplog.at_level(logging.DEBUG):
        JWTVerifier(jwks=document)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 3
    needles = _jwk_material(ring) + _secret_needles()
    needles.append(forge.private_jwk(ring.p384)["d"][:24])
    _assert_clean(
        [caplog.text, json.dumps([r.args for r in caplog.records], default=repr)], needles
    )


def test_reprs_hold_no_key_material(ring: forge.KeyRing) -> None:
    keys = [
        Key.secret(SECRET, "HS256", kid=KID),
        key_for(ring, "RS256", "r"),
        Key.jwk(forge.oct_jwk(SECRET, kid="o"), allow_symmetric=True),
    ]
    verifier = JWTVerifier(keys=keys, audience=AUD)
    texts = [repr(k) for k in keys] + [str(k) for k in keys] + [repr(verifier), str(verifier)]
    texts += [repr(verifier.config), repr(verifier.cache_info())]
    needles = [*_secret_needles(), forge.jwk(ring.rsa.public_key())["n"][:24]]
    _assert_clean(texts, needles)


def test_cached_claims_repr_is_the_claims_only() -> None:
    token = _mint(_good_body())
    verifier = _verifier("ok")
    claims = verifier.verify(token, now=NOW)
    _assert_clean([repr(claims), str(claims)], _needles(token) + _secret_needles())
