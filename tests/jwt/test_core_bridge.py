"""The one crossing between the compiled core and the Python layer (``_core.py``)."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import grelmicro_core
import pytest

from grelmicro.jwt import _core, errors
from grelmicro.jwt.errors import ConfigurationError, JWTError, TokenRejectedError

PACKAGE = Path(_core.__file__).parent
CORE_KINDS = grelmicro_core.error_kinds()

#: Kinds the core raises while building keys or policies, never while verifying.
BUILD_TIME_KINDS = {"invalid-key", "weak-key", "invalid-config"}


def test_core_error_kinds_are_unique():
    assert len(CORE_KINDS) == len(set(CORE_KINDS))
    assert CORE_KINDS


def test_every_core_kind_is_mapped_and_nothing_else():
    assert set(_core.KIND_TO_ERROR) == set(CORE_KINDS)


def test_every_kind_maps_to_its_own_class():
    classes = list(_core.KIND_TO_ERROR.values())

    assert len(classes) == len(set(classes))


@pytest.mark.parametrize("kind", CORE_KINDS)
def test_kind_and_class_agree(kind: str):
    cls = _core.KIND_TO_ERROR[kind]

    assert issubclass(cls, JWTError)
    assert cls.reason == kind
    assert cls.__name__ in errors.__all__
    if kind in BUILD_TIME_KINDS:
        assert issubclass(cls, ConfigurationError)
    else:
        assert issubclass(cls, TokenRejectedError)


@pytest.mark.parametrize("kind", CORE_KINDS)
def test_translate(kind: str):
    core_error = grelmicro_core.CoreError(kind, "a message")

    translated = _core.translate(core_error)

    assert type(translated) is _core.KIND_TO_ERROR[kind]
    assert str(translated) == "a message"
    assert translated.reason == kind


def test_raise_translated_hides_the_core_error():
    core_error = grelmicro_core.CoreError("signature", "signature verification failed")

    with pytest.raises(errors.InvalidSignatureError) as caught:
        _core.raise_translated(core_error)

    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_every_rejection_class_is_reachable_from_the_core_or_python():
    """Each TokenRejectedError leaf is raised by someone: the core or the guard."""
    mapped = set(_core.KIND_TO_ERROR.values())
    # The cnf reader (grelmicro/jwt/_confirmation.py) and the route's bindings raise these.
    mapped |= {errors.BindingError, errors.UncheckedBindingError, errors.CertificateBindingError}
    # The router raises these as core errors for issuer templates (grelmicro/jwt/_tenants.py).
    mapped |= set(_core.PYTHON_KINDS.values())
    abstract = {errors.TokenRejectedError, errors.ClaimsRejectedError}
    for reason, cls in errors.REASONS.items():
        if issubclass(cls, TokenRejectedError) and cls not in abstract:
            assert cls in mapped, reason


def test_only_core_module_imports_the_compiled_core():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name.split(".")[0] == "grelmicro_core" for name in names):
                offenders.append(path.name)
    assert sorted(set(offenders)) == ["_core.py"]


def test_bridge_re_exports_the_core_objects():
    assert _core.sha256_digest is grelmicro_core.sha256_digest
    assert _core.CoreError is grelmicro_core.CoreError
    assert _core.Verifier is grelmicro_core.Verifier
    assert _core.__version__ == grelmicro_core.__version__


# -- which grelmicro-core serves this grelmicro ------------------------------------------------


def test_the_installed_core_is_the_one_this_grelmicro_pins():
    wanted = _core.wanted_core_version()
    assert wanted is not None  # grelmicro is installed (editable or wheel) with its pin
    assert wanted.endswith("+jwt")
    assert _core.core_version_problem(importlib.metadata.version("grelmicro-core"), wanted) is None


@pytest.mark.parametrize(
    ("installed", "compatible"),
    [
        ("0.9.0+jwt", True),
        ("0.9.7+jwt", True),  # a patch release of the core
        ("0.1.5", False),  # the other project's grelmicro-core on PyPI
        ("0.9.0", False),  # no local label: not built from this source
        ("0.10.0+jwt", False),
        ("1.9.0+jwt", False),
    ],
)
def test_a_mismatched_core_is_named_with_both_versions(installed, compatible):
    problem = _core.core_version_problem(installed, "0.9.0+jwt")

    if compatible:
        assert problem is None
    else:
        assert problem is not None
        assert f"grelmicro-core {installed} is installed" in problem
        assert "needs grelmicro-core 0.9.0+jwt" in problem
        assert "--no-index" in problem
