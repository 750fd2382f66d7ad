"""The verified-token cache: deadlines, what is stored, eviction, keys, rotation.

Time moves through ``now=``; the cache's table (in the core) is inspected
through the verifier's private ``_cache`` and the table's test-only
``_entry``/``_keys`` (the only way to see what it holds).
"""

from __future__ import annotations

import gc
import hashlib
import types
from collections.abc import Callable

import pytest
from forge import NOW, SECRET, Signer, hmac_key, tamper

from grelmicro.jwt import (
    CacheInfo,
    Claims,
    ExpiredTokenError,
    InvalidAudienceError,
    InvalidSignatureError,
    Issuer,
    JWTVerifier,
    Key,
    TokenNotYetValidError,
    TokenTooOldError,
)
from grelmicro.jwt._cache import TokenCache


def cache_of(verifier: JWTVerifier) -> TokenCache:
    cache = verifier._cache
    assert cache is not None
    return cache


def entry_for(verifier: JWTVerifier, token: str) -> tuple[float, Claims, float] | None:
    entry: tuple[float, Claims, float] | None = cache_of(verifier)._table._entry(token)
    return entry


def sha256(token: str | bytes) -> bytes:
    data = token.encode() if isinstance(token, str) else token
    return hashlib.sha256(data).digest()


def strings_reachable_from(root: object) -> list[str | bytes]:
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


@pytest.fixture(params=["digest", "token"])
def cache_key(request: pytest.FixtureRequest) -> str:
    key: str = request.param
    return key


# -- deadline -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exp", "ttl", "deadline"),
    [
        pytest.param(NOW + 100, 300, NOW + 100, id="exp-first"),
        pytest.param(NOW + 1000, 300, NOW + 300, id="ttl-first"),
        pytest.param(NOW + 300, 300, NOW + 300, id="equal"),
        pytest.param(NOW + 10.5, 300, NOW + 10.5, id="float-exp"),
        pytest.param(NOW + 1000, 0.25, NOW + 0.25, id="sub-second-ttl"),
        pytest.param(10**30, 300, NOW + 300, id="huge-int-exp"),
    ],
)
def test_deadline_is_the_earlier_of_exp_and_ttl(
    exp: float, ttl: float, deadline: float, cache_key: str, token: Callable[..., str]
):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_ttl=ttl, cache_key=cache_key)
    text = token(exp=exp)

    verifier.verify(text, now=NOW)

    entry = entry_for(verifier, text)
    assert entry is not None
    assert entry[0] == deadline


def test_leeway_does_not_extend_the_deadline(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], leeway=30, cache_stats=True)
    text = token(exp=NOW + 10)

    first = verifier.verify(text, now=NOW)
    after_exp = verifier.verify(text, now=NOW + 15)  # still valid thanks to leeway

    entry = entry_for(verifier, text)
    assert entry is None or entry[0] == NOW + 10
    assert after_exp is not first
    assert verifier.cache_info().misses == 2


def test_served_before_the_deadline_reverified_after_exp(cache_key: str, token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_key=cache_key, cache_stats=True)
    text = token(exp=NOW + 100, sub="u")

    first = verifier.verify(text, now=NOW)
    just_before = verifier.verify(text, now=NOW + 99.999)

    assert just_before is first  # a hit hands out the cached object
    with pytest.raises(ExpiredTokenError):
        verifier.verify(text, now=NOW + 100)
    with pytest.raises(ExpiredTokenError):
        verifier.verify(text, now=NOW + 5000)
    assert verifier.cache_info().hits == 1


def test_reverified_after_the_ttl(cache_key: str, token: Callable[..., str]):
    verifier = JWTVerifier(
        [Key.secret(SECRET)], cache_key=cache_key, cache_ttl=60, cache_stats=True
    )
    text = token(exp=NOW + 1000)

    first = verifier.verify(text, now=NOW)
    hit = verifier.verify(text, now=NOW + 59)
    fresh = verifier.verify(text, now=NOW + 60)

    assert hit is first
    assert fresh is not first
    assert fresh == first
    entry = entry_for(verifier, text)
    assert entry is not None
    assert entry[0] == NOW + 120
    assert (verifier.cache_info().hits, verifier.cache_info().misses) == (1, 2)


@pytest.mark.parametrize("leeway", [0, 5])
def test_cached_entry_never_outlives_max_age(leeway: float, cache_key: str, signer: Signer):
    """A token past ``max_age`` is refused even if it was cached while young."""
    verifier = JWTVerifier([Key.secret(SECRET)], max_age=60, leeway=leeway, cache_key=cache_key)
    text = signer.mint({"exp": NOW + 1000, "iat": NOW - 50})

    first = verifier.verify(text, now=NOW)

    entry = entry_for(verifier, text)
    assert entry is not None
    assert entry[0] <= NOW + 10 + leeway  # iat + max_age (+ leeway), not exp or the TTL
    assert verifier.verify(text, now=NOW + 9) is first
    with pytest.raises(TokenTooOldError):
        verifier.verify(text, now=NOW + 10.5 + leeway)  # 60.5 s (+ leeway) after iat


def test_an_issuer_s_own_max_age_holds_on_a_cache_hit(cache_key: str):
    """Each issuer's policy bounds what the cache serves, not the verifier-wide one.

    The deadline once came from the verifier-wide ``max_age`` (none here), so
    a token 150 s past its iat was served from the cache although its
    issuer allows 60 s (and a fresh verify refuses it).
    """
    strict = hmac_key(secret=b"tenant-a-" + SECRET)
    lax = hmac_key(secret=b"tenant-b-" + SECRET)
    verifier = JWTVerifier(
        issuers=[
            Issuer("https://a.example/", keys=[Key.secret(b"tenant-a-" + SECRET)], max_age=60),
            Issuer("https://b.example/", keys=[Key.secret(b"tenant-b-" + SECRET)]),
        ],
        cache_key=cache_key,
    )
    young = strict.mint({"iss": "https://a.example/", "iat": NOW, "exp": NOW + 1000})
    other = lax.mint({"iss": "https://b.example/", "iat": NOW, "exp": NOW + 1000})

    first = verifier.verify(young, now=NOW)
    verifier.verify(other, now=NOW)

    assert verifier.verify(young, now=NOW + 59) is first  # still a hit
    entry = entry_for(verifier, young)
    assert entry is not None
    assert entry[0] == NOW + 60  # iat + this issuer's max_age
    other_entry = entry_for(verifier, other)
    assert other_entry is not None
    assert other_entry[0] == NOW + 300  # the other issuer has no max_age: the TTL
    with pytest.raises(TokenTooOldError):
        verifier.verify(young, now=NOW + 150)


# -- what is never stored ---------------------------------------------------------------


def test_tokens_without_exp_are_never_stored(cache_key: str, signer: Signer):
    verifier = JWTVerifier([Key.secret(SECRET)], require_exp=False, cache_key=cache_key)
    text = signer.mint({"sub": "forever"})

    first = verifier.verify(text, now=NOW)
    second = verifier.verify(text, now=NOW)

    assert first == second == {"sub": "forever"}
    assert first is not second
    assert len(cache_of(verifier)) == 0
    assert cache_of(verifier)._table._order_length == 0


def test_store_keeps_nothing_without_a_valid_until():
    cache = TokenCache(4, 300)

    cache.store(b"k", object(), {"sub": "forever"}, None, NOW)

    assert len(cache) == 0
    assert cache._table._order_length == 0


@pytest.mark.parametrize(
    "valid_until",
    [NOW, NOW - 1, float("nan"), float("-inf")],
    ids=["now", "past", "nan", "-inf"],
)
def test_store_ignores_a_valid_until_not_after_now(valid_until: float):
    cache = TokenCache(4, 300)

    cache.store(b"k", object(), {"exp": NOW + 60}, valid_until, NOW)

    assert len(cache) == 0


def test_store_takes_the_earlier_of_valid_until_and_the_ttl():
    cache = TokenCache(4, 300, key="token")
    early, late = object(), object()

    cache.store(b"early", early, {}, NOW + 10, NOW)
    cache.store(b"late", late, {}, NOW + 1000, NOW)

    assert cache._table._entry(b"early") == (NOW + 10, early, NOW)
    assert cache._table._entry(b"late") == (NOW + 300, late, NOW)


def test_rejections_are_never_stored(cache_key: str, token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], audience="api", cache_key=cache_key)
    refused = [
        (token(exp=NOW - 1, aud="api"), ExpiredTokenError),
        (tamper(token(aud="api")), InvalidSignatureError),
        (token(aud="other"), InvalidAudienceError),
    ]

    for text, error in refused:
        for _ in range(2):
            with pytest.raises(error):
                verifier.verify(text, now=NOW)

    assert len(cache_of(verifier)) == 0
    assert cache_of(verifier)._table._order_length == 0


def test_a_rejected_token_is_accepted_once_it_becomes_valid(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)])
    text = token(nbf=NOW + 70)

    with pytest.raises(TokenNotYetValidError):
        verifier.verify(text, now=NOW)

    # Within the default 60 s allowed ahead: accepted before nbf, and cached.
    assert verifier.verify(text, now=NOW + 10).get("nbf") == NOW + 70
    assert len(cache_of(verifier)) == 1


def test_a_token_cached_inside_the_allowance_ahead_is_judged_at_each_time(
    cache_key: str, signer: Signer
):
    """Stored while its nbf is still ahead: served later, never before it was stored,
    and never past exp (the allowance ahead does not reach exp)."""
    verifier = JWTVerifier([Key.secret(SECRET)], cache_key=cache_key, cache_ttl=3600)
    text = signer.mint({"exp": NOW + 100, "nbf": NOW + 30, "iat": NOW + 30})

    first = verifier.verify(text, now=NOW)
    assert entry_for(verifier, text) is not None
    assert verifier.verify(text, now=NOW + 50) is first
    assert verifier.verify(text, now=NOW + 99.5) is first
    with pytest.raises(ExpiredTokenError):
        verifier.verify(text, now=NOW + 100)
    # Earlier than it was stored, and beyond the allowance: the core decides, and refuses.
    with pytest.raises(TokenNotYetValidError):
        verifier.verify(text, now=NOW - 31)


# -- eviction ---------------------------------------------------------------------------------


def test_eviction_is_fifo_and_bounded(cache_key: str, token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=3, cache_key=cache_key)
    tokens = [token(jti=f"t{i}") for i in range(6)]
    cache = cache_of(verifier)

    for text in tokens:
        verifier.verify(text, now=NOW)
        assert len(cache) <= 3
        assert cache._table._order_length <= 3

    assert [entry_for(verifier, text) is not None for text in tokens] == [False] * 3 + [True] * 3


def test_a_hit_does_not_refresh_the_order(cache_key: str, token: Callable[..., str]):
    # FIFO, not LRU: a hit writes nothing, so the oldest entry goes first regardless.
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=2, cache_key=cache_key)
    first, second, third = (token(jti=f"t{i}") for i in range(3))
    verifier.verify(first, now=NOW)
    verifier.verify(second, now=NOW)
    keys_before = cache_of(verifier)._table._keys()
    entries_before = [entry_for(verifier, text) for text in (first, second)]

    assert verifier.verify(first, now=NOW + 1) is entries_before[0][1]  # type: ignore[index]

    assert cache_of(verifier)._table._keys() == keys_before
    assert [entry_for(verifier, text) for text in (first, second)] == entries_before
    verifier.verify(third, now=NOW + 1)
    assert entry_for(verifier, first) is None
    assert entry_for(verifier, second) is not None
    assert entry_for(verifier, third) is not None


def test_expired_entries_are_drained_first(cache_key: str, token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=4, cache_key=cache_key)
    short_a, short_b = token(exp=NOW + 10, jti="a"), token(exp=NOW + 10, jti="b")
    long_c, late_d = token(exp=NOW + 1000, jti="c"), token(exp=NOW + 1000, jti="d")
    for text in (short_a, short_b, long_c):
        verifier.verify(text, now=NOW)

    verifier.verify(late_d, now=NOW + 20)  # room for it, yet a and b are past their deadline

    cache = cache_of(verifier)
    assert len(cache) == cache._table._order_length == 2
    assert entry_for(verifier, short_a) is None
    assert entry_for(verifier, short_b) is None
    assert entry_for(verifier, long_c) is not None
    assert entry_for(verifier, late_d) is not None


def test_cache_size_one(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=1, cache_stats=True)
    first, second = token(jti="1"), token(jti="2")

    for _ in range(3):
        verifier.verify(first, now=NOW)
        verifier.verify(second, now=NOW)

    assert len(cache_of(verifier)) == 1
    assert verifier.cache_info().hits == 0


# -- rotation ---------------------------------------------------------------------------------


def test_rotate_to_other_keys_replaces_the_cache(cache_key: str, token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_key=cache_key)
    text = token()
    verifier.verify(text, now=NOW)
    old_cache = cache_of(verifier)

    verifier.rotate([Key.secret(SECRET, kid="k2")])  # same secret, other kid: a removal

    assert cache_of(verifier) is not old_cache
    assert len(cache_of(verifier)) == 0
    assert verifier.cache_info().size == 0
    assert verifier.verify(text, now=NOW)["exp"] == NOW + 3600


# -- keys: digest by default, the token on request ------------------------------------------


def test_digest_mode_keys_are_sha256_digests_never_the_token(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)])
    tokens = [token(jti=str(i)) for i in range(5)]

    for text in tokens:
        verifier.verify(text, now=NOW)
        verifier.verify(text.encode(), now=NOW)  # same digest, same entry

    keys = cache_of(verifier)._table._keys()
    assert keys == [sha256(text) for text in tokens]  # one entry per token, str or bytes
    for text in tokens:
        entry = entry_for(verifier, text)
        assert entry is not None
        deadline, claims, stored_at = entry
        assert (deadline, stored_at) == (NOW + 300, NOW)
        assert type(claims) is Claims
    held = strings_reachable_from(cache_of(verifier))
    for text in tokens:
        assert text not in held
        assert text.encode() not in held
        assert all(text.split(".")[2] not in str(value) for value in held)


def test_token_mode_keys_are_the_tokens_as_given(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_key="token")
    text = token()

    first = verifier.verify(text, now=NOW)
    second = verifier.verify(text.encode(), now=NOW)

    assert cache_of(verifier)._table._keys() == [text.encode()]  # the token's bytes
    assert second is first  # str and bytes forms of a token share one entry


def test_cache_size_zero_holds_nothing(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=0)
    text = token()

    first = verifier.verify(text, now=NOW)
    second = verifier.verify(text, now=NOW)

    assert verifier._cache is None
    assert first is not second
    assert verifier.cache_info().size == 0


def test_a_clock_going_back_misses_the_cache_and_lets_the_core_decide(
    cache_key: str, signer: Signer
):
    """An entry is served only from its storing time on: an earlier ``now`` re-verifies."""
    verifier = JWTVerifier([Key.secret(SECRET)], cache_key=cache_key, leeway_ahead=0)
    text = signer.mint({"exp": NOW + 1000, "nbf": NOW - 10})

    first = verifier.verify(text, now=NOW)

    assert verifier.verify(text, now=NOW + 1) is first
    with pytest.raises(TokenNotYetValidError):
        verifier.verify(text, now=NOW - 11)


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


# -- How claims are built (the core makes Claims without their __init__) ------


@pytest.mark.parametrize("cache_size", [0, 8])
def test_claims_are_built_as_their_init_would(cache_size: int, token: Callable[..., str]):
    check = JWTVerifier([Key.secret(SECRET, "HS256")], cache_size=cache_size)
    raw = token(sub="u1", roles=["a", "b"])

    claims = check.verify(raw, now=NOW)

    assert type(claims) is Claims
    assert claims == Claims(dict(claims.items()))
    assert claims.subject == "u1"
    assert claims["roles"] == ("a", "b")
    assert type(claims._data) is types.MappingProxyType  # read-only: the cache shares it
    with pytest.raises(AttributeError):
        claims.other = 1  # type: ignore[attr-defined]


class _OwnNew:
    __slots__ = ("data",)

    def __new__(cls) -> _OwnNew:
        return super().__new__(cls)


class _Readonly:
    __slots__ = ()
    data = property(lambda self: None)


class _Plain:
    __slots__ = ("data",)


class _Subclass(_Plain):
    __slots__ = ()


@pytest.mark.parametrize(
    ("claims", "slot", "why"),
    [
        (_OwnNew, "data", "has its own __new__"),
        (_Readonly, "data", "slot is not a member"),
        (_Plain, "missing", "defines no such slot"),
        (_Subclass, "data", "defines no such slot"),
        (len, "data", "needs claims to be a class"),
    ],
)
def test_a_claims_slot_the_core_cannot_fill_is_refused(claims: object, slot: str, why: str):
    with pytest.raises(TypeError, match=why):
        TokenCache(1, 60.0, verify=lambda token, now: {}, claims=claims, claims_slot=slot)  # type: ignore[arg-type]


def test_a_plain_slot_class_is_filled_by_the_core(signer: Signer):
    engine = JWTVerifier([Key.secret(SECRET, "HS256")], cache_size=0)._engine
    cache = TokenCache(4, 60.0, verify=engine.verify, claims=_Plain, claims_slot="data")

    made = cache.verify(signer.mint({"exp": NOW + 60, "sub": "s"}), now=NOW)

    assert type(made) is _Plain
    assert made.data == {"exp": NOW + 60, "sub": "s"}
