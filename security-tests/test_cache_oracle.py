"""The verified-token cache as an oracle or a bypass.

Attack class: making the cache answer where the core would refuse: a
rejection remembered (or a success remembered past ``exp``), an entry
reached by a different token (a tampered copy, another verifier, keys
rotated since), claims mutated by one request and served to the next, an
unbounded cache grown by a flood, the core's header memo reused across
key sets, and the test suite's introspection hooks (``TokenCache._keys``
lists every cached token's key, the bearer tokens themselves under
``cache_key="token"``; ``_entry`` another request's claims) shipped in the
wheel, for any code in the process to read.

References:
- design.md §5 "The cache" (key = SHA-256 of the token by default; deadline
  = earliest of ``exp``, insertion + TTL and ``iat + max_age``; rejections
  never cached; key rotation replaces the cache) and the header memo in
  ``grelmicro-core/src/verifier.rs``;
- CWE-613 (insufficient expiration), CWE-345 (insufficient verification of
  data authenticity), CWE-524 (cache containing sensitive information),
  CWE-489 (active debug code);
- RFC 6750 §5.2 (bearer tokens: lifetime and replay).
"""

from __future__ import annotations

import gc
import threading
import types
from typing import Any

import forge
import pytest
from support import NOW, accept, key_for, mint, payload, reject

from grelmicro.jwt import JWTVerifier, TokenRejectedError

MODES = ["digest", "token"]


def cached(
    ring: forge.KeyRing, alg: str = "HS256", kid: str | None = None, **options: Any
) -> JWTVerifier:
    options.setdefault("cache_stats", True)
    return JWTVerifier(keys=[key_for(ring, alg, kid)], **options)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("body", "reason", "options"),
    [
        (payload(exp=NOW - 1), "expired", {}),
        (payload(nbf=NOW + 120), "not-yet-valid", {}),
        (payload(aud="other"), "audience", {"audience": "mine"}),
        (payload(iss="other"), "issuer", {"issuer": "mine"}),
        ({"sub": "no-exp"}, "missing-claim", {}),
    ],
    ids=["expired", "not-yet-valid", "audience", "issuer", "missing-claim"],
)
def test_rejections_are_never_cached(
    ring: forge.KeyRing, mode: str, body: dict[str, Any], reason: str, options: dict[str, Any]
) -> None:
    seen: list[str] = []
    verifier = cached(ring, cache_key=mode, on_reject=lambda e: seen.append(e.reason), **options)
    token = mint(ring, "HS256", body=body)
    for _ in range(3):
        reject(verifier, token, reason)
    assert seen == [reason] * 3
    info = verifier.cache_info()
    assert (info.size, info.hits, info.misses) == (0, 0, 3)


@pytest.mark.parametrize("mode", MODES)
def test_forged_token_is_refused_each_time(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode)
    forged = forge.mint({"alg": "HS256"}, payload(), b"x" * 32, "HS256")
    for _ in range(3):
        reject(verifier, forged, "signature")
    assert verifier.cache_info().size == 0


@pytest.mark.parametrize("mode", MODES)
def test_cached_token_expires_on_time(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode)
    token = mint(ring, "HS256", body=payload(exp=NOW + 100))
    accept(verifier, token)
    accept(verifier, token, now=NOW + 99.999)
    assert verifier.cache_info().hits == 1
    reject(verifier, token, "expired", now=NOW + 100)
    reject(verifier, token, "expired", now=NOW + 10_000)


@pytest.mark.parametrize("mode", MODES)
def test_cached_token_respects_max_age(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode, max_age=60)
    token = mint(ring, "HS256", body=payload(iat=NOW))
    accept(verifier, token)
    accept(verifier, token, now=NOW + 59)
    reject(verifier, token, "too-old", now=NOW + 61)


@pytest.mark.parametrize("mode", MODES)
def test_cache_ttl_bounds_an_entry(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode, cache_ttl=10)
    token = mint(ring, "HS256")
    accept(verifier, token)
    accept(verifier, token, now=NOW + 5)
    accept(verifier, token, now=NOW + 11)
    info = verifier.cache_info()
    assert (info.hits, info.misses) == (1, 2)


@pytest.mark.parametrize("mode", MODES)
def test_nan_clock_is_never_a_hit(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode)
    token = mint(ring, "HS256")
    accept(verifier, token)
    reject(verifier, token, "expired", now=float("nan"))
    reject(verifier, token, "expired", now=float("inf"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("claim", "reason"), [("nbf", "not-yet-valid"), ("iat", "issued-in-future")]
)
def test_cache_answers_like_the_core_for_an_earlier_now(
    ring: forge.KeyRing, mode: str, claim: str, reason: str
) -> None:
    # A clock stepped back, or a caller's now=..., before the insertion time.
    verifier = cached(ring, cache_key=mode)
    token = mint(ring, "HS256", body=payload(**{claim: NOW}))
    accept(verifier, token)
    reject(verifier, token, reason, now=NOW - 1000)


def test_minus_infinity_clock_is_never_a_hit(ring: forge.KeyRing) -> None:
    verifier = cached(ring)
    token = mint(ring, "HS256", body=payload(nbf=NOW))
    accept(verifier, token)
    reject(verifier, token, "not-yet-valid", now=float("-inf"))


@pytest.mark.parametrize("mode", MODES)
def test_tampered_copy_of_a_cached_token(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode)
    token = mint(ring, "HS256")
    accept(verifier, token)
    signature = forge.signature_of(token)
    reject(verifier, forge.with_signature(token, forge.flip_bit(signature, 0)), "signature")
    for changed in (token + "A", token[:-1], token + "AAAA"):
        sig = changed.split(".")[2]
        reject(verifier, changed, "signature" if forge.canonical(sig) else "malformed")


@pytest.mark.parametrize("mode", MODES)
def test_two_valid_signatures_are_two_tokens(ring: forge.KeyRing, mode: str) -> None:
    # ECDSA is randomised: same header and payload, two different valid tokens.
    verifier = cached(ring, "ES256", cache_key=mode)
    first, second = mint(ring, "ES256"), mint(ring, "ES256")
    assert first != second
    assert accept(verifier, first) == accept(verifier, second)
    assert verifier.cache_info().misses == 2


@pytest.mark.parametrize("mode", MODES)
def test_claims_belong_to_their_own_token(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode)
    tokens = {f"user-{i}": mint(ring, "HS256", body=payload(sub=f"user-{i}")) for i in range(50)}
    for _ in range(3):
        for sub, token in tokens.items():
            assert accept(verifier, token).subject == sub


def test_cache_is_per_verifier(ring: forge.KeyRing) -> None:
    token = mint(ring, "HS256", body=payload(aud="a"))
    first = cached(ring, audience="a")
    accept(first, token)
    other_key = JWTVerifier(keys=[key_for(ring, "HS512")], cache_stats=True)
    reject(other_key, token, "algorithm")
    other_policy = cached(ring, audience="b")
    reject(other_policy, token, "audience")
    from grelmicro.jwt import Key  # noqa: PLC0415

    other_secret = JWTVerifier(keys=[Key.secret(b"another-secret-of-32-bytes-00001", "HS256")])
    reject(other_secret, token, "signature")


@pytest.mark.parametrize("mode", MODES)
def test_rotation_replaces_the_cache(ring: forge.KeyRing, mode: str) -> None:
    from grelmicro.jwt import Key  # noqa: PLC0415

    verifier = cached(ring, kid="k1", cache_key=mode)
    token = mint(ring, "HS256", {"alg": "HS256", "kid": "k1"})
    accept(verifier, token)
    assert verifier.cache_info().size == 1
    verifier.rotate([Key.secret(b"rotated-secret-of-32-bytes-00001", "HS256", kid="k1")])
    assert verifier.cache_info().size == 0
    reject(verifier, token, "signature")
    verifier.rotate([Key.secret(b"rotated-secret-of-32-bytes-00001", "HS256", kid="k2")])
    reject(verifier, token, "unknown-key")
    verifier.rotate([key_for(ring, "HS256", "k1")])
    accept(verifier, token)


def test_header_memo_does_not_survive_rotation(ring: forge.KeyRing) -> None:
    # Cache off: only the core's per-verifier header memo could remember the key.
    from grelmicro.jwt import Key  # noqa: PLC0415

    verifier = JWTVerifier(keys=[key_for(ring, "HS256", "k")], cache_size=0)
    header = {"alg": "HS256", "kid": "k"}
    for _ in range(3):
        accept(verifier, mint(ring, "HS256", header))
    new_secret = b"rotated-secret-of-32-bytes-00002"
    verifier.rotate([Key.secret(new_secret, "HS256", kid="k")])
    reject(verifier, mint(ring, "HS256", header), "signature")
    accept(verifier, forge.mint(header, payload(), new_secret, "HS256"))


def test_header_memo_is_not_filled_by_forgeries(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(
        keys=[key_for(ring, "HS256", "a"), key_for(ring, "HS512", "b")], cache_size=0
    )
    for i in range(8):
        forged = forge.mint({"alg": "HS256", "kid": "a", "n": i}, payload(), b"x" * 32, "HS256")
        reject(verifier, forged, "signature")
    accept(verifier, mint(ring, "HS256", {"alg": "HS256", "kid": "a"}))
    accept(verifier, mint(ring, "HS512", {"alg": "HS512", "kid": "b"}))
    # A memoised header still picks the same key and checks every signature.
    forged = forge.mint({"alg": "HS256", "kid": "a"}, payload(), ring.hs512[:32], "HS256")
    reject(verifier, forged, "signature")


@pytest.mark.parametrize("mode", MODES)
def test_cached_claims_are_read_only(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode)
    token = mint(ring, "HS256", body=payload(roles=["user"], profile={"tier": "free"}))
    claims = accept(verifier, token)
    with pytest.raises(TypeError):
        claims["sub"] = "admin"  # type: ignore[index]
    with pytest.raises(TypeError):
        claims["profile"]["tier"] = "gold"
    with pytest.raises(AttributeError):
        claims["roles"].append("admin")
    with pytest.raises(AttributeError):
        claims.subject = "admin"  # type: ignore[misc]
    copy = claims.to_dict()
    copy["sub"] = "admin"
    copy["profile"]["tier"] = "gold"
    again = accept(verifier, token)
    assert again.subject == "user-1"
    assert again["profile"]["tier"] == "free"
    assert again["roles"] == ("user",)
    assert verifier.cache_info().hits == 1


def test_digest_mode_keeps_no_bearer_token(ring: forge.KeyRing) -> None:
    # The shipped wheel has no hook listing the table's keys (see the next
    # test); tests/jwt/test_cache.py reads them in a test build and finds
    # SHA-256 digests. Here: no Python object the verifier reaches holds
    # the token, and the str and bytes forms share the one entry.
    verifier = cached(ring, cache_key="digest")
    token = mint(ring, "HS256")
    accept(verifier, token)
    accept(verifier, token.encode())
    assert verifier.cache_info().size == 1
    held = _strings_reachable_from(verifier)
    for needle in (token, token.encode(), token.split(".")[2]):
        assert not any(needle in value for value in held if type(value) is type(needle))


def test_the_wheel_ships_no_test_hooks(ring: forge.KeyRing) -> None:
    # Built with the cargo feature test-hooks only for the test suite
    # (scripts/corewheel.py --test-hooks); what ships is built without.
    from grelmicro_core import _core  # noqa: PLC0415

    hooks = [
        (_core.TokenCache, "_entry"),
        (_core.TokenCache, "_keys"),
        (_core.TokenCache, "_order_length"),
        (_core.VerifyCall, "_view_len"),
    ]
    assert [f"{cls.__name__}.{name}" for cls, name in hooks if hasattr(cls, name)] == []
    verifier = cached(ring, cache_key="token")
    accept(verifier, mint(ring, "HS256"))
    assert verifier._cache is not None
    assert not hasattr(verifier._cache._table, "_keys")
    assert not hasattr(verifier.verify, "_view_len")


def _strings_reachable_from(root: object) -> list[str | bytes]:
    """Every str and bytes object reachable from ``root`` through the GC graph."""
    found: list[str | bytes] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, (str, bytes)):
            found.append(obj)
            continue
        stack.extend(gc.get_referents(obj))
        if type(obj) is dict:
            stack.extend(obj)  # str keys are not reported by the GC traversal
    return found


@pytest.mark.parametrize("mode", MODES)
def test_flood_stays_within_the_bound(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode, cache_size=16)
    for i in range(200):
        accept(verifier, mint(ring, "HS256", body=payload(n=i)))
        reject(
            verifier, forge.mint({"alg": "HS256"}, payload(n=i), b"x" * 32, "HS256"), "signature"
        )
    assert verifier.cache_info().size <= 16


@pytest.mark.parametrize("mode", MODES)
def test_threads_never_see_another_tokens_claims(ring: forge.KeyRing, mode: str) -> None:
    verifier = cached(ring, cache_key=mode, cache_size=8, cache_stats=False)
    tokens = [(f"user-{i}", mint(ring, "HS256", body=payload(sub=f"user-{i}"))) for i in range(40)]
    forged = forge.mint({"alg": "HS256"}, payload(sub="admin"), b"x" * 32, "HS256")
    errors: list[str] = []

    def worker(offset: int) -> None:
        for round_ in range(150):
            sub, token = tokens[(offset + round_) % len(tokens)]
            try:
                got = verifier.verify(token, now=NOW).subject
            except Exception as exc:
                errors.append(repr(exc))
                return
            if got != sub:
                errors.append(f"{sub} got {got}")
            try:
                verifier.verify(forged, now=NOW)
                errors.append("forged token accepted")
            except TokenRejectedError:
                pass

    threads = [threading.Thread(target=worker, args=(i * 7,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert verifier.cache_info().size <= 8
