"""The X.509 form of a key set, as Firebase documents its key endpoint (issue 39).

``https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com``
answers a JSON object of ``kid`` to PEM X.509 certificate (RSA, RS256) with
a ``Cache-Control`` max-age. Here a real server on 127.0.0.1 serves that
exact shape, with certificates made in the test: the keys load wherever a
JWKS would, follow the max-age, rotate, and a malformed entry is skipped
with a reason that quotes no certificate material.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from forge import NOW, Signer, certificate_pem, private_key
from servers import FAST, DocumentServer
from support import FakeClock, timed

from grelmicro.jwt import (
    AlgorithmNotAllowedError,
    JWTVerifier,
    KeysUnavailableError,
    UnknownKeyError,
    providers,
)

PATH = "/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"
PROJECT = "my-project"
# Google's header on this endpoint (the max-age varies with the rotation).
GOOGLE_CACHE = {"Cache-Control": "public, max-age=19302, must-revalidate, no-transform"}
OPTIONS = dataclasses.replace(FAST, max_ttl=86_400)
BROKEN = (
    "-----BEGIN CERTIFICATE-----\nMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END CERTIFICATE-----\n"
)


def signer(kid: str, seed: int, alg: str = "RS256") -> Signer:
    return private_key(alg, kid=kid, seed=seed)


def certificates(*keys: Signer, **extra: str) -> dict[str, str]:
    """The endpoint's shape: ``{kid: PEM certificate}`` (plus raw ``extra`` entries)."""
    document = {key.kid or "": certificate_pem(key.private).decode() for key in keys}
    document.update(extra)
    return document


def id_token(key: Signer, **claims: Any) -> str:
    """A Firebase ID token as securetoken issues it."""
    return key.mint(
        {
            "iss": f"https://securetoken.google.com/{PROJECT}",
            "aud": PROJECT,
            "auth_time": NOW - 60,
            "user_id": "uid-1",
            "sub": "uid-1",
            "iat": NOW - 60,
            "exp": NOW + 3540,
            "firebase": {"identities": {}, "sign_in_provider": "password"},
            **claims,
        }
    )


def firebase(server: DocumentServer, clock: FakeClock) -> JWTVerifier:
    preset = providers.firebase(
        PROJECT, key_form="x509", jwks_url=server.url(PATH), allow_insecure_loopback=True
    )
    return JWTVerifier(issuers=[preset], fetch=timed(OPTIONS, clock), clock=clock)


def test_the_firebase_preset_names_both_endpoints() -> None:
    assert providers.firebase(PROJECT).jwks_url == providers.FIREBASE_JWKS
    assert providers.firebase(PROJECT, key_form="x509").jwks_url == providers.FIREBASE_X509
    assert providers.FIREBASE_X509.endswith("/x509/securetoken@system.gserviceaccount.com")


def test_a_map_of_certificates_is_a_key_set_that_follows_its_max_age(
    server: DocumentServer,
) -> None:
    k1, k2 = signer("k1", 71), signer("k2", 72)
    server.set(PATH, certificates(k1, k2), headers=GOOGLE_CACHE)
    verifier = firebase(server, FakeClock())

    assert verifier.verify(id_token(k1)).subject == "uid-1"
    assert verifier.verify(id_token(k2)).subject == "uid-1"
    health = verifier.health()
    assert (health.key_count, health.fetch_count) == (2, 1)
    assert health.expires_at == NOW + 19302
    verifier.close()


def test_keys_from_rsa_certificates_verify_rs256_only(server: DocumentServer) -> None:
    k1 = signer("k1", 71)
    server.set(PATH, certificates(k1), headers=GOOGLE_CACHE)
    verifier = firebase(server, FakeClock())

    same_key_other_alg = Signer("PS256", k1.private, kid="k1")
    with pytest.raises(AlgorithmNotAllowedError):
        verifier.verify(id_token(same_key_other_alg))
    verifier.close()


def test_an_ec_certificate_gives_an_es256_key() -> None:
    ec = signer("e1", 73, alg="ES256")
    verifier = JWTVerifier(
        jwks=certificates(ec), issuer=f"https://securetoken.google.com/{PROJECT}", audience=PROJECT
    )

    assert verifier.verify(id_token(ec), now=NOW).subject == "uid-1"


def test_a_rotation_is_followed_and_a_retired_key_refused(server: DocumentServer) -> None:
    k1, k2, k3 = signer("k1", 71), signer("k2", 72), signer("k3", 74)
    server.set(PATH, certificates(k1, k2), headers=GOOGLE_CACHE)
    clock = FakeClock()
    verifier = firebase(server, clock)
    assert verifier.verify(id_token(k1))

    # Google rotates: k1 retired, k3 published; a token naming k3 refetches.
    server.set(PATH, certificates(k2, k3), headers=GOOGLE_CACHE)
    clock.now += 3
    assert verifier.verify(id_token(k3)).subject == "uid-1"
    assert server.count(PATH) == 2
    with pytest.raises(UnknownKeyError):
        verifier.verify(id_token(k1, jti="after-rotation"))
    assert verifier.verify(id_token(k2)).subject == "uid-1"
    verifier.close()


def test_a_malformed_entry_is_skipped_with_a_reason_and_no_material(
    server: DocumentServer, caplog: pytest.LogCaptureFixture
) -> None:
    k1 = signer("k1", 71)
    good = certificate_pem(k1.private).decode()
    server.set(PATH, certificates(k1, bad=BROKEN, key="not a certificate"), headers=GOOGLE_CACHE)
    caplog.set_level(logging.INFO, logger="grelmicro.jwt")
    verifier = firebase(server, FakeClock())

    assert verifier.verify(id_token(k1)).subject == "uid-1"
    with pytest.raises(UnknownKeyError):
        verifier.verify(id_token(Signer("RS256", k1.private, kid="bad")))
    skipped = [r for r in caplog.records if getattr(r, "jwt_event", None) == "keys.key_skipped"]
    assert sorted(r.jwt_kid for r in skipped) == ["bad", "key"]  # type: ignore[attr-defined]
    body = good.splitlines()[1]
    for record in skipped:
        text = record.getMessage()
        assert "certificate" in text
        assert "MIIBCgKCAQEA" not in text
        assert body[:24] not in text
    verifier.close()


def test_a_document_without_one_usable_certificate_is_a_key_fetch_failure(
    server: DocumentServer,
) -> None:
    k1 = signer("k1", 71)
    server.set(PATH, {"bad": BROKEN}, headers=GOOGLE_CACHE)
    verifier = firebase(server, FakeClock())

    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(id_token(k1))
    error = verifier.health().last_error or ""
    assert "no usable key" in error
    assert "MIIBCgKCAQEA" not in error
    assert "MIIBCgKCAQEA" not in str(caught.value)
    verifier.close()
