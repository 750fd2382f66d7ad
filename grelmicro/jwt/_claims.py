"""Claims: the read-only view over a verified payload.

A verified payload may be served from the cache to many requests at once, so
nothing reachable from a :class:`Claims` can be changed: arrays arrive as
tuples and objects, the top level included, as read-only mapping proxies (the
core builds them that way and stores the top level in the private payload
slot without a Python frame), and there is no way to set an item. Claims built
in Python (``Claims(mapping)``, unpickling, pydantic) freeze a copy of what
they are given the same way. :meth:`Claims.to_dict` hands out a deep, mutable
copy for code that wants one.
"""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, overload

from grelmicro.jwt import _grants
from grelmicro.jwt.errors import ConfigurationError, InvalidClaimError, MissingClaimError

__all__ = ["Claims"]

T = TypeVar("T")


class _Template(Protocol):
    text: str

    def match(self, iss: str) -> str | None: ...


#: The issuer templates verifiers of this process were built with, each with
#: its tenant claim: :attr:`Claims.tenant` reads a tenant only through one.
#: Replaced whole (a tuple), so readers need no lock.
_TEMPLATES: tuple[tuple[_Template, str], ...] = ()
_TEMPLATES_LOCK = threading.Lock()


def register_template(template: _Template, claim: str) -> None:
    """Make :attr:`Claims.tenant` read ``claim`` from tokens whose ``iss`` ``template`` matches."""
    global _TEMPLATES  # noqa: PLW0603 - a tuple replaced whole
    with _TEMPLATES_LOCK:
        if any(t.text == template.text and c == claim for t, c in _TEMPLATES):
            return
        _TEMPLATES = (*_TEMPLATES, (template, claim))


def _thaw(value: Any) -> Any:
    """Deep copy of a decoded JSON value into plain dicts and lists."""
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    if isinstance(value, (MappingProxyType, dict)):
        return {key: _thaw(item) for key, item in value.items()}
    return value


def _freeze(value: Any) -> Any:
    """The read-only form the core builds: tuples and mapping proxies."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(item) for item in value)
    if isinstance(value, (MappingProxyType, dict)):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    return value


def _failing_fields(exc: Any) -> str:
    """Name the fields a model refused, with pydantic's error type, no values."""
    fields = []
    for error in exc.errors(include_input=False, include_url=False, include_context=False):
        # A location may be a claim name from the token (extra="forbid"): escaped, capped.
        where = ".".join(ascii(str(part))[1:-1][:64] for part in error["loc"]) or "claims"
        fields.append(f"{where} ({error['type']})")
    return "claims do not fit the model: " + ", ".join(fields)


def _frozen(data: Mapping[str, Any]) -> MappingProxyType[str, Any]:
    """A read-only copy of a top-level payload, its values frozen too."""
    return MappingProxyType({key: _freeze(item) for key, item in data.items()})


#: The slot the payload lives in (``__payload``, name-mangled): the core writes
#: it once when it builds claims (this class's ``__init__`` does not run then)
#: and the methods read it; ``_data`` is a read-only view of it for everyone
#: else (below), so neither ``claims._data = ...``, ``del claims._data`` nor
#: ``object.__setattr__(claims, "_data", ...)`` can re-point claims that the
#: cache shares with later requests, and ``__init__`` runs once.
PAYLOAD_SLOT = "_Claims__payload"


def _rebuild(data: dict[str, Any]) -> Claims:
    """Unpickle: freeze the plain copy again."""
    return Claims(data)


def _validate(value: object) -> Claims:
    """Pydantic's validator: a ``Claims`` passes, a mapping of claims is frozen."""
    if isinstance(value, Claims):
        return value
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return Claims(value)
    raise ValueError("claims must be a mapping with string keys")


def _time(value: object) -> datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    return None


class Claims(Mapping[str, Any]):
    """The claims of a verified token: a read-only mapping with typed accessors.

    ``claims["sub"]``, ``claims.get("tenant")``, ``"email" in claims`` work as
    on a dict; :attr:`subject`, :attr:`issuer`, :attr:`audience`,
    :attr:`expires_at`, :attr:`scopes` and friends give the registered claims
    with their types. Instances are immutable and safe to share across threads.
    """

    # One private slot and no __dict__: ``claims.x = ...`` raises
    # AttributeError and there is no ``__setitem__``. The slot holds a
    # read-only mapping proxy: the core stores its payload there directly on
    # every verification (this __init__ does not run then); here, for claims
    # built in Python, a frozen copy, so no mutable dict is shared.
    __slots__ = ("__payload",)

    __payload: MappingProxyType[str, Any]

    def __init__(self, data: Mapping[str, Any]) -> None:
        try:
            _PAYLOAD.__get__(self)
        except AttributeError:
            _PAYLOAD.__set__(self, _frozen(data))
            return
        # A Claims served from the cache is shared by later requests: it
        # cannot be pointed at other claims after it was built.
        raise AttributeError("Claims is immutable: build a new Claims instead of re-initialising")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Claims is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Claims is immutable: cannot delete {name!r}")

    # -- Mapping -----------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        return self.__payload[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.__payload)

    def __len__(self) -> int:
        return len(self.__payload)

    def __contains__(self, name: object) -> bool:
        return name in self.__payload

    def get(self, name: str, default: Any = None) -> Any:
        """The claim called ``name``, or ``default``."""
        # ``in`` and ``[]`` reach the proxied dict directly; the proxy's own
        # ``get`` looks the method up on it by name, on every read
        # (docs/design-notes.md, ``grelmicro.jwt._claims``). The properties
        # below too.
        data = self.__payload
        return data[name] if name in data else default  # noqa: SIM401

    def keys(self) -> KeysView[str]:
        """The claim names (a read-only view)."""
        return self.__payload.keys()

    def values(self) -> ValuesView[Any]:
        """The claim values (a read-only view)."""
        return self.__payload.values()

    def items(self) -> ItemsView[str, Any]:
        """``(name, value)`` pairs (a read-only view)."""
        return self.__payload.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Claims):
            return self.__payload == other.__payload
        if isinstance(other, Mapping):
            return bool(_thaw(self.__payload) == _thaw(dict(other)))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = {k: self.__payload[k] for k in ("iss", "sub", "exp") if k in self.__payload}
        return f"Claims({shown!r}, {len(self.__payload)} claims)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (_thaw(self.__payload),))

    def __copy__(self) -> Claims:
        return self  # immutable: a copy may be the same object

    def __deepcopy__(self, memo: dict[int, Any]) -> Claims:
        return self

    @overload
    def require(self, name: str) -> Any: ...

    @overload
    def require(self, name: str, kind: type[T]) -> T: ...

    def require(self, name: str, kind: type[Any] | None = None) -> Any:
        """The claim called ``name``, refusing the token when it is absent or of another type.

        ``claims.require("sub", str)`` is typed ``str``; without ``kind`` the
        result is ``Any``. JSON arrays are tuples and objects read-only
        mappings, so ``kind`` is ``str``, ``int``, ``float``, ``bool``,
        ``tuple`` or ``Mapping`` (a ``bool`` is never an ``int`` here; an
        ``int`` passes as a ``float``).

        Raises:
            MissingClaimError: the token has no such claim.
            InvalidClaimError: the claim is ``null`` or not a ``kind``.
            ConfigurationError: ``kind`` is not a class.

        Both refusals are :class:`~grelmicro.jwt.TokenRejectedError`, so a
        route of an app under ``JWTBearer.install`` answers them with 401.
        """
        if kind is not None and not isinstance(kind, type):
            raise ConfigurationError("require() takes a class as kind, such as str or int")
        shown = ascii(name[:64])[1:-1] if isinstance(name, str) else "(not a string)"
        try:
            value = self.__payload[name]
        except (KeyError, TypeError):
            missing = MissingClaimError(f"the token has no {shown} claim")
            missing.claim = shown
            raise missing from None
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return value  # a JSON number: an int is a float as far as typing goes
        if value is None or (
            kind is not None
            and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool))
        ):
            found = "null" if value is None else type(value).__name__
            wanted = "a value" if kind is None else kind.__name__
            invalid = InvalidClaimError(f"the {shown} claim is {found}, not {wanted}")
            invalid.claim = shown
            raise invalid
        return value

    # -- registered claims ---------------------------------------------------

    @property
    def subject(self) -> str | None:
        """``sub``: who the token is about."""
        data = self.__payload
        return data["sub"] if "sub" in data else None  # noqa: SIM401

    @property
    def issuer(self) -> str | None:
        """``iss``: who issued the token."""
        data = self.__payload
        return data["iss"] if "iss" in data else None  # noqa: SIM401

    @property
    def audience(self) -> tuple[str, ...]:
        """``aud`` as a tuple (a single string becomes a one-element tuple)."""
        data = self.__payload
        aud = data["aud"] if "aud" in data else None  # noqa: SIM401
        if aud is None:
            return ()
        if isinstance(aud, str):
            return (aud,)
        return tuple(aud)

    @property
    def tenant(self) -> str | None:
        """The tenant of a multi-tenant issuer's token, or None for any other token.

        Read only from a token whose ``iss`` an issuer template
        (``{tenantid}``) configured in this process matches, from that
        template's tenant claim (``tid`` by default, ``tenant_claim=``
        otherwise), and only when the claim equals the tenant the ``iss``
        names: what the verifier checked (and allowed) for that template.
        Another issuer's token is None even when it carries a ``tid`` (a
        customer's own identity provider may put anything there); read such
        a claim with ``claims.require(name, str)`` knowing who set it.
        """
        data = self.__payload
        iss = data["iss"] if "iss" in data else None  # noqa: SIM401
        if not isinstance(iss, str):
            return None
        for template, claim in _TEMPLATES:
            tenant = template.match(iss)
            if tenant is not None:
                value = data[claim] if claim in data else None  # noqa: SIM401
                return tenant if value == tenant else None
        return None

    @property
    def is_guest(self) -> bool:
        """Whether the user is a guest of the token's tenant (Microsoft Entra ID's rules).

        ``acct`` is 1 (Entra's optional claim: 0 member, 1 guest), or ``idp``
        (who authenticated the user) names another issuer than ``iss``: a B2B
        guest whose home is another tenant, or a personal Microsoft account.
        False for tokens carrying neither. An issuer with ``guests="refuse"``
        refuses such tokens itself (:class:`~grelmicro.jwt.GuestRejectedError`).
        """
        data = self.__payload
        acct = data["acct"] if "acct" in data else None  # noqa: SIM401
        if acct == 1 and not isinstance(acct, bool):
            return True
        idp = data["idp"] if "idp" in data else None  # noqa: SIM401
        return isinstance(idp, str) and idp != (data["iss"] if "iss" in data else None)  # noqa: SIM401

    @property
    def token_id(self) -> str | None:
        """``jti``: the token's unique identifier."""
        data = self.__payload
        return data["jti"] if "jti" in data else None  # noqa: SIM401

    @property
    def expires_at(self) -> datetime | None:
        """``exp`` as an aware UTC datetime."""
        data = self.__payload
        return _time(data["exp"]) if "exp" in data else None

    @property
    def issued_at(self) -> datetime | None:
        """``iat`` as an aware UTC datetime."""
        data = self.__payload
        return _time(data["iat"]) if "iat" in data else None

    @property
    def not_before(self) -> datetime | None:
        """``nbf`` as an aware UTC datetime."""
        data = self.__payload
        return _time(data["nbf"]) if "nbf" in data else None

    @property
    def scopes(self) -> frozenset[str]:
        """Scopes from ``scope`` (RFC 8693) or, when it is absent, ``scp`` (string or list).

        A string is split on the space character (U+0020) only, as RFC 6749
        §3.3 says: other whitespace (a no-break space, a tab) does not
        separate scopes. An item with characters outside the scope-token
        grammar (printable ASCII except the double quote and the backslash)
        is not a scope. ``scope`` wins: ``scp`` is not added to it. The
        FastAPI dependency reads scopes the same way.
        """
        return _grants.granted_scopes(self)

    def has_scopes(self, *required: str, permissions: bool = False) -> bool:
        """Whether every scope in ``required`` was granted.

        ``permissions=True`` also counts Auth0's ``permissions`` array, as
        ``JWTBearer(permissions=True)`` does.
        """
        return _grants.granted_scopes(self, permissions=permissions).issuperset(required)

    def roles(self, *paths: str | Sequence[str]) -> frozenset[str]:
        """Roles found at the claim ``paths`` (default: the ``roles`` claim), together.

        A path is dotted (``"realm_access.roles"``,
        ``"resource_access.my-api.roles"``) or a sequence of claim names (for a
        name with a dot in it). A string containing ``://`` is one claim name,
        as Auth0's namespaced claims are: ``"https://example.com/roles"``. The
        value there is an array of strings or one string (one role); anything
        else grants no role.

        Raises:
            ConfigurationError: a path is empty or has an empty name.
        """
        return _grants.roles_at(self, _grants.role_paths(paths or None))

    def has_roles(
        self, *required: str, paths: str | Sequence[str | Sequence[str]] = "roles"
    ) -> bool:
        """Whether every role in ``required`` is found at ``paths`` (see :meth:`roles`)."""
        return _grants.roles_at(self, _grants.role_paths(paths)).issuperset(required)

    # -- conversions -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A deep, mutable copy in plain dicts and lists."""
        result: dict[str, Any] = _thaw(self.__payload)
        return result

    def to_model(self, model: type[T]) -> T:
        """Validate the claims into a pydantic model class.

        Raises:
            InvalidClaimError: the claims do not fit the model; the message
                names the failing fields only, never a claim's value.
            ConfigurationError: ``model`` is not a pydantic model class.
        """
        validate = getattr(model, "model_validate", None)
        if validate is None or not isinstance(model, type):
            raise ConfigurationError("to_model() needs a pydantic model class (a BaseModel)")
        from pydantic import ValidationError  # noqa: PLC0415 - only needed on this path

        try:
            result: T = validate(self.to_dict())
        except ValidationError as exc:
            message = _failing_fields(exc)
        else:
            return result
        # Raised outside the handler: pydantic's error quotes every claim.
        raise InvalidClaimError(message)

    def to_struct(self, struct: type[T]) -> T:
        """Convert the claims into a ``msgspec.Struct`` class (needs msgspec)."""
        import msgspec  # noqa: PLC0415 - optional dependency, imported on use

        result: T = msgspec.convert(self.to_dict(), struct)
        return result

    # -- pydantic / FastAPI ------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Let pydantic (and FastAPI) take ``Claims`` as a field or response type.

        A ``Claims`` instance passes as it is; a mapping of claims is frozen
        into one; output is the plain JSON object (``to_dict()``).
        """
        from pydantic_core import core_schema  # noqa: PLC0415 - used by pydantic users only

        mapping = core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
        return core_schema.no_info_plain_validator_function(
            _validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                cls.to_dict, return_schema=mapping
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        """The JSON schema of ``Claims`` (in OpenAPI documents): a JSON object."""
        return {"type": "object", "additionalProperties": True, "title": "Claims"}


_PAYLOAD: Any = Claims.__dict__[PAYLOAD_SLOT]
# ``_data``: the payload for readers outside the class, read-only (a property
# has no setter, so ``object.__setattr__(claims, "_data", ...)`` fails too).
type.__setattr__(Claims, "_data", property(_PAYLOAD.__get__, doc="The payload (read-only)."))
