"""Shared helpers: build verifiers from a :class:`forge.KeyRing`, assert refusals.

A refusal is only accepted as the one a test expects when it is an instance
of the public error class for that reason, its ``reason`` is that exact
string, and it is a :class:`TokenRejectedError` (so a service answers 401).
"""

from __future__ import annotations

from typing import Any

import forge
import pytest

from grelmicro.jwt import Claims, JWTVerifier, Key, TokenRejectedError
from grelmicro.jwt.errors import REASONS as PUBLIC_REASONS

NOW = forge.NOW

#: Every reason a refused bearer token may carry and the one public class that
#: carries it: the leaves of ``TokenRejectedError`` in the public table
#: (``grelmicro.jwt.errors.REASONS``), without the DPoP proof reasons.
REASONS: dict[str, type[TokenRejectedError]] = {
    reason: cls
    for reason, cls in PUBLIC_REASONS.items()
    if issubclass(cls, TokenRejectedError)
    and not cls.__subclasses__()
    and not reason.startswith("dpop-")
}


def payload(**extra: Any) -> dict[str, Any]:
    """A payload valid at :data:`NOW`: ``sub`` and ``exp`` one hour ahead."""
    out: dict[str, Any] = {"sub": "user-1", "exp": NOW + 3600}
    out.update(extra)
    return out


def key_for(ring: forge.KeyRing, alg: str, kid: str | None = None) -> Key:
    """The verification :class:`Key` matching ``ring``'s signing key for ``alg``."""
    if alg.startswith("HS"):
        return Key.secret(ring.private(alg), alg, kid=kid)
    return Key.pem(forge.spki_pem(ring.public(alg)), alg, kid=kid)


def verifier_for(
    ring: forge.KeyRing, alg: str, kid: str | None = None, **options: Any
) -> JWTVerifier:
    """A verifier holding the one key for ``alg`` (cache off unless asked)."""
    options.setdefault("cache_size", 0)
    return JWTVerifier(keys=[key_for(ring, alg, kid)], **options)


def mint(ring: forge.KeyRing, alg: str, header: Any = None, body: Any = None, **kw: Any) -> str:
    """A token correctly signed with ``ring``'s key for ``alg``."""
    if header is None:
        header = {"alg": alg, "typ": "JWT"}
    if body is None:
        body = payload()
    return forge.mint(header, body, ring.private(alg), alg, **kw)


def accept(verifier: JWTVerifier, token: str | bytes, now: float = NOW) -> Claims:
    """Verify ``token`` and return its claims (the positive control of a test)."""
    return verifier.verify(token, now=now)


def outcome(verifier: JWTVerifier, token: Any, now: float = NOW) -> tuple[str, Any]:
    """``("accepted", claims as a dict)`` or ``("rejected", reason)``.

    Anything but a documented :class:`TokenRejectedError` propagates or fails.
    """
    try:
        claims = verifier.verify(token, now=now)
    except TokenRejectedError as exc:
        error = exc
    else:
        return ("accepted", claims.to_dict())
    if REASONS.get(error.reason) is not type(error):
        raise AssertionError(f"undocumented refusal {type(error).__name__}({error.reason})")
    return ("rejected", error.reason)


def reject(verifier: JWTVerifier, token: Any, reason: str, now: float = NOW) -> TokenRejectedError:
    """Assert ``verifier`` refuses ``token`` with exactly ``reason``; return the error."""
    expected = REASONS[reason]
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(token, now=now)
    error = caught.value
    assert error.reason == reason, f"expected {reason!r}, got {error.reason!r}: {error}"
    assert type(error) is expected, f"{type(error).__name__} is not {expected.__name__}"
    return error


# --- the fixed key set and policies shared with both fuzzers ---------------
# grelmicro-core/fuzz/fuzz_targets/verify.rs uses exactly these, so a corpus
# entry means the same to the Rust target, the atheris harness and the replay
# test (test_fuzz_regressions.py).

FUZZ_HS256_SECRET = b"grelmicro-fuzz-hs256-secret-0001"
FUZZ_ES256_SCALAR = 0x5EC0DE5EC0DE5EC0DE5EC0DE5EC0DE5EC0DE5EC0DE5EC0DE5EC0DE5EC0DE
FUZZ_ES256_JWK = {
    "kty": "EC",
    "crv": "P-256",
    "kid": "es",
    "x": "CHtwM9GQGOHZKIv3kaymX4Xk1_oJ4o2QqtbjYCsorAo",
    "y": "6XzpE0gQ3DfO_qt8GPwZAS6U1JJRsrzAwx17nRnCg0M",
}


def fuzz_verifiers(**options: Any) -> tuple[JWTVerifier, JWTVerifier]:
    """The ``open`` and ``strict`` verifiers of the fuzz targets."""
    keys = [Key.secret(FUZZ_HS256_SECRET, "HS256", kid="hs"), Key.jwk(FUZZ_ES256_JWK)]
    open_ = JWTVerifier(keys=keys, audience="fuzz-aud", issuer="fuzz-iss", leeway=30, **options)
    strict = JWTVerifier(
        keys=keys,
        algorithms=["ES256"],
        required=["exp", "sub", "tenant"],
        typ="at+jwt",
        max_age=3600,
        max_depth=4,
        max_token_size=2048,
        **options,
    )
    return open_, strict


# --- FastAPI, in process --------------------------------------------------------
# The dependency is driven through httpx's ASGI transport: the app as a server
# would call it, without a socket (the scope's Host, scheme and headers are
# the client's to choose, which is the point of several attacks).

#: The origin the in-process client addresses unless a test says otherwise.
ORIGIN = "https://api.example.com"


def call(
    app: Any,
    path: str,
    headers: Any = (),
    *,
    method: str = "GET",
    base_url: str = ORIGIN,
    client: tuple[str, int] = ("127.0.0.1", 123),
) -> Any:
    """One request to ``app`` through ``httpx.ASGITransport``; the ``httpx.Response``.

    ``headers`` is a mapping or a list of pairs (two pairs of one name are
    sent as two headers); ``client`` is the peer the app sees
    (``scope["client"]``).
    """
    import asyncio  # noqa: PLC0415

    import httpx  # noqa: PLC0415

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            return await http.request(method, path, headers=headers)

    return asyncio.run(send())


def refused_with(response: Any, status: int, reason: str) -> str:
    """Assert ``response`` is a refusal with ``status`` and ``reason``; its challenge.

    The reason is read from the problem body (``JWTBearer.install``) and, for
    401/400/403, must also be the challenge's ``error_description``.
    """
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json", response.headers
    assert response.json()["reason"] == reason, response.json()
    challenge = response.headers.get("www-authenticate", "")
    if status in (400, 401) and challenge and "error=" in challenge:
        assert f'error_description="{reason}"' in challenge, challenge
    return challenge
