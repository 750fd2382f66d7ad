"""A JWKS fetched from a URL that publishes a private key: the key is skipped, at WARNING.

A provider whose JWKS carries private members (``d``, ``p``, ``q``...) has
leaked its signing key; the operator must hear of it, not find it at INFO.
"""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from forge import b64url

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.testing import AUDIENCE, ISSUER, TestIssuer

JWKS_URL = "https://issuer.test/jwks.json"


def serving(document: dict[str, object]) -> httpx.Client:
    body = json.dumps(document).encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, stream=httpx.ByteStream(body), headers={"Content-Type": "application/json"}
        )

    return httpx.Client(transport=httpx.MockTransport(answer))


def test_a_published_private_key_is_skipped_with_a_warning_others_at_info(
    caplog: pytest.LogCaptureFixture,
):
    good, leaked = TestIssuer(kid="good"), TestIssuer(kid="leaked")
    private = leaked.private_key.private_numbers().private_value
    leaked_jwk = {**leaked.jwks["keys"][0], "d": b64url(private.to_bytes(32, "big"))}
    encryption = {**TestIssuer(kid="enc").jwks["keys"][0], "use": "enc"}
    document = {"keys": [good.jwks["keys"][0], leaked_jwk, encryption]}
    caplog.set_level(logging.DEBUG, logger="grelmicro.jwt")

    with serving(document) as client:
        verifier = JWTVerifier(jwks_url=JWKS_URL, issuer=ISSUER, audience=AUDIENCE, client=client)
        with verifier:
            assert verifier.verify(good.mint()).subject == "test-user"

    skipped = {
        r.jwt_kid: r  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "jwt_event", None) == "keys.key_skipped"
    }
    assert sorted(skipped) == ["enc", "leaked"]  # one record each
    # An encryption key is routine in a provider's JWKS: skipped quietly.
    assert skipped["leaked"].levelno == logging.WARNING
    assert skipped["enc"].levelno == logging.INFO
    assert "'leaked'" in skipped["leaked"].getMessage()
    assert "private key" in skipped["leaked"].getMessage()
    assert "private key" in skipped["leaked"].jwt_reason  # type: ignore[attr-defined]
    # The level follows the code, not the words of the reason.
    codes = {kid: record.jwt_code for kid, record in skipped.items()}  # type: ignore[attr-defined]
    assert codes == {"leaked": "private-key", "enc": "invalid-key"}
    assert leaked_jwk["d"] not in caplog.text
