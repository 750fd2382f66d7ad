"""Claims: mapping access, typed accessors, conversions and immutability.

Claims come from a real verification (the core builds the frozen payload:
arrays as tuples, objects as read-only mapping proxies), because that is
what a cached result shared by many requests looks like.
"""

from __future__ import annotations

import copy
import operator
import pickle
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pydantic
import pytest
from forge import NOW, SECRET, Signer

from grelmicro.jwt import Claims, ConfigurationError, InvalidClaimError, JWTVerifier, Key

UTC = timezone.utc
EPOCH_NOW = datetime.fromtimestamp(NOW, tz=UTC)

PAYLOAD: dict[str, Any] = {
    "iss": "https://idp.example.com/",
    "sub": "user-1",
    "aud": ["api", "admin"],
    "exp": NOW + 3600,
    "nbf": NOW - 60,
    "iat": NOW - 60,
    "jti": "id-123",
    "scope": "read write",
    "roles": ["a", "b"],
    "profile": {"name": "Zoë", "tags": ["x"], "address": {"city": "Lyon"}},
    "max": 2**63 - 1,
    "min": -(2**63),
    "huge": 2**70,
    "ratio": 0.5,
    "flag": True,
    "nothing": None,
}


@pytest.fixture
def verifier() -> JWTVerifier:
    return JWTVerifier([Key.secret(SECRET)], audience=["api"], require_exp=False)


@pytest.fixture
def claims_for(signer: Signer, verifier: JWTVerifier) -> Callable[..., Claims]:
    no_audience = JWTVerifier([Key.secret(SECRET)], require_exp=False)

    def verify(payload: dict[str, Any]) -> Claims:
        chosen = verifier if "aud" in payload else no_audience
        return chosen.verify(signer.mint(payload), now=NOW)

    return verify


@pytest.fixture
def claims(claims_for: Callable[..., Claims]) -> Claims:
    return claims_for(PAYLOAD)


# -- mapping access ----------------------------------------------------------------------


def test_mapping_access(claims: Claims):
    assert claims["sub"] == "user-1"
    assert claims.get("sub") == "user-1"
    assert claims.get("absent") is None
    assert claims.get("absent", 7) == 7
    assert "sub" in claims
    assert "absent" not in claims
    assert 3 not in claims
    assert len(claims) == len(PAYLOAD)
    assert list(claims) == list(PAYLOAD)
    assert list(claims.keys()) == list(PAYLOAD)
    assert dict(claims.items())["jti"] == "id-123"
    assert "id-123" in list(claims.values())
    assert isinstance(claims, Mapping)
    with pytest.raises(KeyError):
        claims["absent"]


def test_json_values_come_back_exact(claims: Claims):
    assert claims["max"] == 2**63 - 1
    assert claims["min"] == -(2**63)
    assert claims["huge"] == 2**70
    assert type(claims["huge"]) is int
    assert claims["ratio"] == 0.5
    assert claims["flag"] is True
    assert claims["nothing"] is None
    assert claims["profile"]["name"] == "Zoë"


def test_equality(claims: Claims, claims_for: Callable[..., Claims]):
    assert claims == PAYLOAD
    assert PAYLOAD == claims  # noqa: SIM300 - the reflected comparison, from the dict side
    assert claims == claims_for(PAYLOAD)
    assert claims != {**PAYLOAD, "sub": "someone-else"}
    assert claims_for({"a": 1}) != claims_for({"a": 2})
    assert claims != ["not", "a", "mapping"]
    assert claims != "sub"


def test_claims_are_not_hashable(claims: Claims):
    with pytest.raises(TypeError):
        hash(claims)


# -- typed accessors ---------------------------------------------------------------------


def test_registered_claims(claims: Claims):
    assert claims.subject == "user-1"
    assert claims.issuer == "https://idp.example.com/"
    assert claims.audience == ("api", "admin")
    assert claims.token_id == "id-123"
    assert claims.expires_at == EPOCH_NOW + timedelta(hours=1)
    assert claims.issued_at == EPOCH_NOW - timedelta(minutes=1)
    assert claims.not_before == EPOCH_NOW - timedelta(minutes=1)


@pytest.mark.parametrize("name", ["expires_at", "issued_at", "not_before"])
def test_times_are_aware_utc(claims: Claims, name: str):
    value = getattr(claims, name)

    assert isinstance(value, datetime)
    assert value.tzinfo is UTC
    assert value.utcoffset() == timedelta(0)


def test_fractional_times(claims_for: Callable[..., Claims]):
    claims = claims_for({"exp": NOW + 1.25, "iat": NOW - 0.5})

    assert claims.expires_at == EPOCH_NOW + timedelta(seconds=1.25)
    assert claims.issued_at == EPOCH_NOW - timedelta(seconds=0.5)


def test_absent_registered_claims(claims_for: Callable[..., Claims]):
    claims = claims_for({"custom": 1})

    assert claims.subject is None
    assert claims.issuer is None
    assert claims.audience == ()
    assert claims.token_id is None
    assert claims.expires_at is None
    assert claims.issued_at is None
    assert claims.not_before is None
    assert claims.scopes == frozenset()


def test_single_audience_becomes_a_tuple(claims_for: Callable[..., Claims]):
    assert claims_for({"aud": "api"}).audience == ("api",)


@pytest.mark.parametrize(
    ("payload", "scopes"),
    [
        pytest.param({"scope": "read write"}, {"read", "write"}, id="scope-string"),
        pytest.param({"scope": "  read   write "}, {"read", "write"}, id="scope-extra-spaces"),
        pytest.param({"scope": ""}, set(), id="scope-empty"),
        pytest.param({"scope": "read read"}, {"read"}, id="scope-duplicate"),
        pytest.param({"scp": ["read", "write"]}, {"read", "write"}, id="scp-list"),
        pytest.param({"scp": "read write"}, {"read", "write"}, id="scp-string"),
        pytest.param({"scp": []}, set(), id="scp-empty-list"),
        pytest.param({"scp": ["read", 3, None]}, {"read"}, id="scp-non-strings-ignored"),
        pytest.param({"scope": "a", "scp": ["b"]}, {"a"}, id="scope-wins-over-scp"),
        pytest.param({"scope": "a\tb"}, set(), id="tab-is-not-a-separator"),
        pytest.param({"scope": "a\u00a0b c"}, {"c"}, id="no-break-space-is-not-a-separator"),
        pytest.param({"scp": "a\nb c"}, {"c"}, id="scp-string-same-grammar"),
        pytest.param({"scp": ["a", "b c", 'q"', "\u00e9"]}, {"a"}, id="scp-items-are-scope-tokens"),
        pytest.param({"permissions": ["read"]}, set(), id="permissions-not-by-default"),
        pytest.param({"scope": 5}, set(), id="scope-not-text"),
        pytest.param({}, set(), id="none"),
    ],
)
def test_scopes(payload: dict[str, Any], scopes: set[str], claims_for: Callable[..., Claims]):
    claims = claims_for(payload)

    assert claims.scopes == frozenset(scopes)
    assert isinstance(claims.scopes, frozenset)


@pytest.mark.parametrize(
    ("required", "granted"),
    [
        pytest.param((), True, id="nothing-required"),
        pytest.param(("read",), True, id="one"),
        pytest.param(("read", "write"), True, id="all"),
        pytest.param(("read", "admin"), False, id="one-missing"),
        pytest.param(("rea",), False, id="no-prefix-match"),
    ],
)
def test_has_scopes(required: tuple[str, ...], granted: bool, claims: Claims):
    assert claims.has_scopes(*required) is granted


def test_has_scopes_counts_auth0_permissions_only_when_asked(claims_for: Callable[..., Claims]):
    claims = claims_for({"scope": "openid", "permissions": ["read:items", "bad item", 3]})

    assert not claims.has_scopes("read:items")
    assert claims.has_scopes("openid", "read:items", permissions=True)
    assert not claims.has_scopes("bad item", permissions=True)


ROLE_PAYLOAD: dict[str, Any] = {
    "roles": ["Orders.Write", "", 7],
    "realm_access": {"roles": ["admin", "user"]},
    "resource_access": {"my-api": {"roles": ["editor"]}, "other.app": {"roles": ["x"]}},
    "permissions": ["read:items"],
    "cognito:groups": ["staff"],
    "groups": "one-group",
    "nested": {"roles": {"not": "a list"}},
    # Auth0 namespaced claims: a URL as the claim name, dots included.
    "https://example.com/roles": ["auditor"],
    "https://example.com/app": {"roles": ["app-admin"]},
    "https://example": {"com/roles": ["split-on-dots"]},
}


@pytest.mark.parametrize(
    ("paths", "roles"),
    [
        pytest.param((), {"Orders.Write"}, id="default-roles-claim"),
        pytest.param(("realm_access.roles",), {"admin", "user"}, id="keycloak-realm"),
        pytest.param(("resource_access.my-api.roles",), {"editor"}, id="keycloak-client"),
        pytest.param((("resource_access", "other.app", "roles"),), {"x"}, id="dotted-client-id"),
        pytest.param(("permissions",), {"read:items"}, id="auth0-permissions"),
        pytest.param(("cognito:groups",), {"staff"}, id="cognito-groups"),
        pytest.param(("groups",), {"one-group"}, id="single-string"),
        pytest.param(("nested.roles",), set(), id="object-grants-nothing"),
        pytest.param(("missing.path",), set(), id="absent"),
        pytest.param(("roles.deeper",), set(), id="through-a-list"),
        pytest.param(
            ("roles", "realm_access.roles"), {"Orders.Write", "admin", "user"}, id="union"
        ),
        pytest.param(("https://example.com/roles",), {"auditor"}, id="url-named-claim"),
        pytest.param(
            (("https://example.com/app", "roles"),), {"app-admin"}, id="into-a-url-named-claim"
        ),
        pytest.param(("https://example.com/app.roles",), set(), id="url-string-is-one-name"),
    ],
)
def test_roles_from_claim_paths(
    paths: tuple[Any, ...], roles: set[str], claims_for: Callable[..., Claims]
):
    claims = claims_for(ROLE_PAYLOAD)

    assert claims.roles(*paths) == frozenset(roles)


def test_has_roles(claims_for: Callable[..., Claims]):
    claims = claims_for(ROLE_PAYLOAD)

    assert claims.has_roles("Orders.Write")
    assert claims.has_roles("admin", "user", paths="realm_access.roles")
    assert claims.has_roles(
        "admin", "editor", paths=["realm_access.roles", "resource_access.my-api.roles"]
    )
    assert not claims.has_roles("admin")
    assert not claims.has_roles("admin", "root", paths="realm_access.roles")
    assert claims.has_roles("auditor", paths="https://example.com/roles")
    assert not claims.has_roles("split-on-dots", paths="https://example.com/roles")


@pytest.mark.parametrize("paths", ["", "a..b", ".roles", [""], [()], [("a", "")], 5, []])
def test_a_bad_role_path_is_a_configuration_error(paths: Any, claims_for: Callable[..., Claims]):
    with pytest.raises(ConfigurationError):
        claims_for(ROLE_PAYLOAD).has_roles("admin", paths=paths)


# -- conversions ------------------------------------------------------------------------------


def test_to_dict_is_a_deep_mutable_copy(claims: Claims):
    plain = claims.to_dict()

    assert plain == PAYLOAD
    assert type(plain) is dict
    assert type(plain["roles"]) is list
    assert type(plain["profile"]) is dict
    assert type(plain["profile"]["tags"]) is list
    assert type(plain["profile"]["address"]) is dict
    assert claims.to_dict() is not plain


def test_mutating_to_dict_output_leaves_the_claims_alone(
    claims: Claims, verifier: JWTVerifier, signer: Signer
):
    token = signer.mint(PAYLOAD)
    shared = verifier.verify(token, now=NOW)
    plain = shared.to_dict()

    plain["sub"] = "attacker"
    plain["roles"].append("admin")
    plain["profile"]["address"]["city"] = "elsewhere"
    plain["profile"]["tags"].clear()

    again = verifier.verify(token, now=NOW)
    assert again is shared  # served from the cache
    assert again == PAYLOAD
    assert again.to_dict() == PAYLOAD


class Profile(pydantic.BaseModel):
    name: str
    tags: list[str]


class TokenModel(pydantic.BaseModel):
    sub: str
    aud: list[str]
    exp: int
    roles: tuple[str, ...]
    profile: Profile
    huge: int


def test_to_model(claims: Claims):
    model = claims.to_model(TokenModel)

    assert model.sub == "user-1"
    assert model.aud == ["api", "admin"]
    assert model.roles == ("a", "b")
    assert model.profile == Profile(name="Zoë", tags=["x"])
    assert model.huge == 2**70
    model.profile.tags.append("y")  # the model owns its own copy
    assert claims["profile"]["tags"] == ("x",)


def test_to_model_validation_error(claims_for: Callable[..., Claims]):
    # A taxonomy error naming the failing fields, never quoting a claim.
    with pytest.raises(InvalidClaimError) as caught:
        claims_for({"sub": "x", "profile": "TOPSECRET-VALUE"}).to_model(TokenModel)

    assert "profile" in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)
    assert caught.value.__context__ is None
    assert caught.value.__cause__ is None


def test_to_model_refuses_a_non_model(claims: Claims):
    with pytest.raises(ConfigurationError, match="pydantic"):
        claims.to_model(dict)


def token_struct() -> type:
    """A msgspec Struct for the claims (msgspec is optional, like in the package)."""
    msgspec = pytest.importorskip("msgspec")

    class TokenStruct(msgspec.Struct):  # type: ignore[misc,name-defined]
        sub: str
        aud: list[str]
        exp: int
        profile: dict[str, Any]

    return TokenStruct


def test_to_struct(claims: Claims):
    struct: Any = claims.to_struct(token_struct())

    assert struct.sub == "user-1"
    assert struct.aud == ["api", "admin"]
    assert struct.exp == NOW + 3600
    assert struct.profile["address"] == {"city": "Lyon"}


def test_to_struct_validation_error(claims_for: Callable[..., Claims]):
    msgspec = pytest.importorskip("msgspec")

    with pytest.raises(msgspec.ValidationError):
        claims_for({"sub": "x"}).to_struct(token_struct())


# -- immutability: a cached object is shared, nobody can change it ------------------------


def set_item(claims: Any) -> None:
    claims["sub"] = "x"


def del_item(claims: Any) -> None:
    del claims["sub"]


MUTATIONS = [
    pytest.param(lambda c: setattr(c, "subject", "x"), AttributeError, id="setattr-property"),
    pytest.param(lambda c: setattr(c, "extra", 1), AttributeError, id="setattr-new"),
    pytest.param(lambda c: delattr(c, "subject"), AttributeError, id="delattr-property"),
    pytest.param(set_item, TypeError, id="item-assignment"),
    pytest.param(del_item, TypeError, id="item-deletion"),
    pytest.param(lambda c: c.update(sub="x"), AttributeError, id="update"),
    pytest.param(lambda c: operator.setitem(c.keys().mapping, "sub", "x"), TypeError, id="view"),
    pytest.param(lambda c: c["roles"].append("admin"), AttributeError, id="array-append"),
    pytest.param(lambda c: operator.setitem(c["aud"], 0, "x"), TypeError, id="array-item"),
    pytest.param(lambda c: operator.iadd(c["roles"], ("x",)), None, id="array-iadd-rebinds"),
    pytest.param(
        lambda c: operator.setitem(c["profile"], "name", "x"), TypeError, id="object-item"
    ),
    pytest.param(
        lambda c: operator.setitem(c["profile"]["address"], "city", "x"),
        TypeError,
        id="deep-object",
    ),
    pytest.param(lambda c: c["profile"]["tags"].append("x"), AttributeError, id="deep-array"),
    pytest.param(lambda c: c["profile"].pop("name"), AttributeError, id="object-pop"),
    pytest.param(lambda c: c["profile"].clear(), AttributeError, id="object-clear"),
    pytest.param(lambda c: c["profile"].update(name="x"), AttributeError, id="object-update"),
]


@pytest.mark.parametrize(("mutate", "error"), MUTATIONS)
def test_no_caller_can_mutate_what_another_sees(
    mutate: Callable[[Claims], object],
    error: type[Exception] | None,
    verifier: JWTVerifier,
    signer: Signer,
):
    token = signer.mint(PAYLOAD)
    request_a = verifier.verify(token, now=NOW)

    if error is None:
        mutate(request_a)  # works on a new object, never on the shared one
    else:
        with pytest.raises(error):
            mutate(request_a)

    request_b = verifier.verify(token, now=NOW)
    assert request_b is request_a  # the same shared, cached object
    assert request_b == PAYLOAD
    assert request_b.to_dict() == PAYLOAD


def test_nested_containers_are_frozen_types(claims: Claims):
    assert type(claims["roles"]) is tuple
    assert type(claims["aud"]) is tuple
    assert type(claims["profile"]) is MappingProxyType
    assert type(claims["profile"]["address"]) is MappingProxyType
    assert type(claims["profile"]["tags"]) is tuple


def test_mapping_views_are_read_only(claims: Claims):
    for view in (claims.keys(), claims.values(), claims.items()):
        assert not hasattr(view, "__setitem__")
        assert not hasattr(view, "append")


def test_copies_stay_equal_and_frozen(claims: Claims):
    """A pickled or copied Claims is still the same read-only value."""
    for clone in (pickle.loads(pickle.dumps(claims)), copy.copy(claims), copy.deepcopy(claims)):
        assert type(clone) is Claims
        assert clone == claims
        assert clone == PAYLOAD
        with pytest.raises(AttributeError):
            clone["roles"].append("admin")
        with pytest.raises(TypeError):
            clone["profile"]["name"] = "x"


# -- repr ----------------------------------------------------------------------------------


def test_repr_shows_no_token(signer: Signer, verifier: JWTVerifier):
    token = signer.mint(PAYLOAD)

    text = repr(verifier.verify(token, now=NOW))

    assert text.startswith("Claims(")
    assert "user-1" in text
    assert f"{len(PAYLOAD)} claims" in text
    for segment in token.split("."):
        assert segment not in text
    assert SECRET.decode() not in text
    assert "Lyon" not in text  # only iss, sub and exp are shown
