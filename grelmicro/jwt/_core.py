"""The only importer of ``grelmicro_core``, and the error-kind table.

Every error kind the compiled core can raise maps to exactly one class of
:mod:`grelmicro.jwt.errors`; ``tests/jwt/test_core_bridge.py`` proves the
table is complete.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import NoReturn, ParamSpec, TypeVar

from grelmicro.jwt import errors


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


#: How to install this project's two distributions (docs/installation.md).
_INSTALL = (
    'pip install --no-index --find-links <wheelhouse> "grelmicro[jwt]" (a wheelhouse is '
    "built by scripts/wheelhouse.sh or attached to each release)"
)


def wanted_core_version() -> str | None:
    """The ``grelmicro-core`` version this ``grelmicro`` was released with (its pin)."""
    try:
        requirements = importlib.metadata.requires("grelmicro") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return None
    for requirement in requirements:
        match = re.match(r"grelmicro-core\s*==\s*([^;\s]+)", requirement)
        if match:
            return match.group(1)
    return None


def core_version_problem(installed: str | None, wanted: str | None) -> str | None:
    """Why ``installed`` cannot serve a ``grelmicro`` that wants ``wanted``, or None.

    Compatible: the same major and minor release and the same local label
    (``+jwt``): a patch release of the core may follow its ``grelmicro``.
    """
    if installed is None or wanted is None:
        return None

    def line(version: str) -> tuple[str, str]:
        release, _, label = version.partition("+")
        return ".".join(release.split(".")[:2]), label

    if line(installed) == line(wanted):
        return None
    return (
        f"grelmicro {_distribution_version('grelmicro')} needs grelmicro-core {wanted} "
        f"(or a {line(wanted)[0]}.x+{line(wanted)[1]} patch release), but grelmicro-core "
        f"{installed} is installed. The name grelmicro-core on PyPI belongs to another "
        "project, which cannot share an environment with grelmicro[jwt]: uninstall it and "
        f"install the core built for grelmicro[jwt]: {_INSTALL}"
    )


def foreign_grelmicro_problem(installed: str | None) -> str | None:
    """Why the installed ``grelmicro`` distribution is another project's, or None.

    This project's versions always carry the local label ``+jwt``, which no
    public index accepts; the ``grelmicro`` on PyPI is a different project
    that has no ``jwt`` extra. Both install the same ``grelmicro`` package
    directory, so they cannot share an environment.
    """
    if installed is None or installed.partition("+")[2] == "jwt":
        return None
    return (
        f"grelmicro {installed} is installed: that is another project's grelmicro (PyPI), "
        "not grelmicro[jwt], and the two cannot share an environment (they write the same "
        "grelmicro package). Uninstall both (pip uninstall grelmicro grelmicro-core) and "
        f"install grelmicro[jwt] from its wheelhouse: {_INSTALL}"
    )


_FOREIGN = foreign_grelmicro_problem(_distribution_version("grelmicro"))
if _FOREIGN is not None:
    raise ImportError(_FOREIGN)

try:
    # The compiled module's names, listed once: in its ``__all__`` (the stub
    # ``_core.pyi`` states it, checked against the module by stubtest).
    from grelmicro_core import _core as _compiled
    from grelmicro_core._core import *  # noqa: F403
    from grelmicro_core._core import CoreError, error_kinds
except ImportError as exc:  # pragma: no cover - exercised by hand only
    _installed = _distribution_version("grelmicro-core")
    _found = f" (grelmicro-core {_installed} is installed but cannot serve)" if _installed else ""
    msg = core_version_problem(_installed, wanted_core_version()) or (
        f"grelmicro.jwt needs its compiled core, grelmicro-core "
        f"{wanted_core_version() or ''} built for this interpreter{_found}: {_INSTALL}"
    )
    raise ImportError(msg) from exc

_PROBLEM = core_version_problem(_distribution_version("grelmicro-core"), wanted_core_version())
if _PROBLEM is not None:  # pragma: no cover - a mismatched install, tested through the function
    raise ImportError(_PROBLEM)

__all__ = [
    "KIND_TO_ERROR",
    "PYTHON_KINDS",
    "call",
    "escape",
    "invalid_now",
    "near_miss",
    "quoted",
    "raise_translated",
    "translate",
]
__all__ += _compiled.__all__

P = ParamSpec("P")
T = TypeVar("T")

#: Core error kind -> class: every kind the core names is a ``reason`` of
#: :data:`grelmicro.jwt.errors.REASONS` (a missing one fails at import).
KIND_TO_ERROR: dict[str, type[errors.JWTError]] = {
    kind: errors.REASONS[kind] for kind in error_kinds()
}


#: Refusals the Python layer raises as ``CoreError`` on the routing path
#: (an issuer template's tenant checks), never the core itself.
PYTHON_KINDS: dict[str, type[errors.JWTError]] = {
    "tenant": errors.TenantRejectedError,
    "guest": errors.GuestRejectedError,
    "invalid-claim": errors.InvalidClaimError,
}


def translate(exc: CoreError) -> errors.JWTError:
    """Turn a core error into the matching ``grelmicro.jwt`` error.

    The core's structured context (``exc.context``) becomes attributes of the
    error: times as aware UTC datetimes (and ISO times in the message),
    expected issuers/audiences, the token's ``kid`` and ``alg`` (capped by
    the core, escaped here), who refused an ``alg`` (``refused_by``). Runs
    on the error path only.
    """
    kind, message = exc.args
    cls = KIND_TO_ERROR[kind] if kind in KIND_TO_ERROR else PYTHON_KINDS[kind]
    context = exc.context
    if context is None:
        return cls(message)
    return _with_context(cls, message, context)


#: Time-claim kinds: (claim in the core's context, attribute, message template).
_TIME_ERRORS: dict[type[errors.JWTError], tuple[str, str, str]] = {
    errors.ExpiredTokenError: ("exp", "expires_at", "token expired at {} (now {}, leeway {})"),
    errors.TokenNotYetValidError: (
        "nbf",
        "not_before",
        "token is not valid before {} (now {}, leeway ahead {})",
    ),
    errors.TokenIssuedInFutureError: (
        "iat",
        "issued_at",
        "token was issued in the future at {} (now {}, leeway ahead {})",
    ),
    errors.TokenTooOldError: (
        "iat",
        "issued_at",
        "token was issued at {}, longer ago than allowed (now {}, leeway {})",
    ),
}


def _moment(seconds: object) -> datetime | None:
    if not isinstance(seconds, float):
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def _clamped(seconds: object) -> datetime:
    """A time beyond what a datetime holds: the nearest end of its range (NaN: the latest)."""
    if isinstance(seconds, float) and seconds < 0:
        return datetime.min.replace(tzinfo=timezone.utc)
    return datetime.max.replace(tzinfo=timezone.utc)


def _span(seconds: object) -> timedelta | None:
    if not isinstance(seconds, float):
        return None
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return None


def _iso(moment: datetime | None, seconds: object) -> str:
    if moment is None:
        return str(seconds)
    return moment.isoformat().replace("+00:00", "Z")


def escape(text: str, limit: int = 128) -> str:
    """A token-derived string made safe to log: capped, non-ASCII and control characters escaped."""
    return ascii(text[:limit])[1:-1]


def quoted(text: str, limit: int = 128) -> str:
    r"""``text`` in double quotes, made safe to log: capped, with ``"`` and ``\`` escaped.

    Printable ASCII stays as it is; every other character is escaped as in
    Python (``\n``, ``\x07``, ``\u2028``), so a quoted value can never
    close its quotes or start a new line.
    """
    out = []
    for char in text[:limit]:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.append(ascii(char)[1:-1])
    return '"' + "".join(out) + '"'


def _quoted(values: tuple[str, ...], limit: int, most: int = 4) -> str:
    shown = ", ".join(quoted(v, limit) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


#: A URL's scheme as RFC 3986 §3.1 spells it, then ``://``.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def _scheme_only(seen: str, expected: str) -> bool:
    """Whether both are URLs with a scheme and differ in the scheme alone."""
    first, second = _SCHEME.match(seen), _SCHEME.match(expected)
    return (
        first is not None
        and second is not None
        and first.group(1).lower() != second.group(1).lower()
        and seen[first.end() :] == expected[second.end() :]
    )


def near_miss(seen: str, expected: str) -> str | None:
    """How ``seen`` nearly equals ``expected`` (a configuration slip), or None."""
    if seen == expected:
        return None
    if seen.strip() == expected:
        return "only whitespace around it differs"
    if seen.rstrip("/") == expected.rstrip("/"):
        return "only a trailing slash differs"
    if seen.casefold() == expected.casefold():
        return "only letter case differs"
    if _scheme_only(seen, expected):
        return "only the scheme differs"
    return None


def _mismatch(
    cls: type[errors.JWTError], message: str, expected: tuple[str, ...], seen: tuple[str, ...]
) -> str:
    """An issuer or audience refusal that says what was expected and what the token said.

    Expected values are configuration (safe to show); the token's values
    are escaped and capped. A near miss (trailing slash, case, scheme) is
    called out as such.
    """
    claim = "issuer" if cls is errors.InvalidIssuerError else "audience"
    said = f"the token's {claim} is {_quoted(seen, 128)}"
    if not expected:  # an aud claim with no audience configured
        return f"{message} ({said}); pass audience=... to accept it"
    single = len(seen) == 1 and len(expected) == 1
    misses = [
        how if single else f"{quoted(s)} vs the expected {quoted(e, 256)}: {how}"
        for s in seen
        for e in expected
        if (how := near_miss(s, e)) is not None
    ]
    text = f"{message}: {said}, expected {_quoted(expected, 256)}"
    if misses:
        text += f" (near miss: {misses[0]})"
    return text


def _with_context(
    cls: type[errors.JWTError], message: str, context: Mapping[str, object]
) -> errors.JWTError:
    spec = _TIME_ERRORS.get(cls)
    if spec is not None:
        claim, attribute, template = spec
        when, now = _moment(context.get(claim)), _moment(context.get("now"))
        leeway = _span(context.get("leeway"))
        message = template.format(
            _iso(when, context.get(claim)),
            _iso(now, context.get("now")),
            f"{leeway.total_seconds():g}s" if leeway is not None else "?",
        )
        error = cls(message)
        if when is None and cls is errors.ExpiredTokenError:
            when = _clamped(context.get(claim))  # expires_at is never None
        setattr(error, attribute, when)
        error.now = now  # type: ignore[attr-defined]
        error.leeway = leeway  # type: ignore[attr-defined]
        if cls is errors.TokenTooOldError:
            error.max_age = _span(context.get("max_age"))  # type: ignore[attr-defined]
        return error
    expected = context.get("expected")
    seen = context.get("seen")
    if isinstance(expected, tuple) and isinstance(seen, tuple) and seen:
        message = _mismatch(cls, message, expected, seen)
    error = cls(message)
    if isinstance(expected, tuple):
        error.expected = expected  # type: ignore[attr-defined]
    kid = context.get("kid")
    if isinstance(kid, str):
        error.kid = escape(kid)  # type: ignore[attr-defined]
    algorithm = context.get("algorithm")
    if isinstance(algorithm, str):
        error.algorithm = escape(algorithm)  # type: ignore[attr-defined]
    refused_by = context.get("refused_by")
    if refused_by in ("policy", "keys"):
        error.refused_by = refused_by  # type: ignore[attr-defined]
    named = context.get("claim")
    if isinstance(named, str):
        error.claim = named  # type: ignore[attr-defined]
    return error


def invalid_now(now: object) -> errors.ClaimsRejectedError:
    """The refusal when ``now`` (or the clock's answer) is not a usable time.

    For the verify path's error handling: catch the ``TypeError`` or
    ``OverflowError`` a bad ``now`` raises and raise this instead.
    """
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        problem = f"is a {type(now).__name__}, not a number"
    else:
        problem = "is out of range"
    return errors.ClaimsRejectedError(
        f"the time to check the token against {problem}: pass now= (or make the clock "
        "return) seconds since the epoch as an int or float, e.g. time.time()"
    )


def call(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``, a core error raised as its ``grelmicro.jwt`` error.

    For building (keys, policies, verifiers), not for the verify path.
    """
    try:
        return function(*args, **kwargs)
    except CoreError as exc:
        raise translate(exc) from None


def raise_translated(exc: CoreError) -> NoReturn:
    """Raise the translated error without chaining the core one."""
    raise translate(exc) from None
