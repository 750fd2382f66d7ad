"""The front door: ``grelmicro.jwt.__all__`` is complete, sorted and documented."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

import grelmicro.jwt

#: Modules whose ``__all__`` is meant for users (re-exported by the package).
USER_MODULES = [
    "grelmicro.jwt.errors",
    "grelmicro.jwt._claims",
    "grelmicro.jwt._config",
    "grelmicro.jwt._keys",
    "grelmicro.jwt._verifier",
]

#: Public modules of their own (not re-exported): each ``__all__`` complete and documented.
OWN_MODULES = ["grelmicro.jwt.challenges", "grelmicro.jwt.guard"]

#: Listed in a module's ``__all__`` but deliberately not re-exported.
NOT_RE_EXPORTED = {
    "ENV_PREFIX",  # the default of ``JWTVerifier.from_env(prefix=...)``, written out in its doc
    "REASONS",  # the reason -> class table, read as ``grelmicro.jwt.errors.REASONS``
}

PUBLIC = grelmicro.jwt.__all__


def isort_style(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then the rest."""
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


def test_all_is_sorted_and_unique():
    assert list(PUBLIC) == sorted(PUBLIC)
    assert list(PUBLIC) == sorted(PUBLIC, key=isort_style)
    assert len(PUBLIC) == len(set(PUBLIC))


@pytest.mark.parametrize("name", PUBLIC)
def test_everything_listed_exists(name: str):
    assert getattr(grelmicro.jwt, name) is not None


def test_every_public_name_in_the_package_namespace_is_listed():
    namespace = {
        name
        for name, value in vars(grelmicro.jwt).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }

    assert namespace == set(PUBLIC)


@pytest.mark.parametrize("module_name", USER_MODULES)
def test_every_user_facing_name_is_re_exported(module_name: str):
    module = importlib.import_module(module_name)
    missing = set(module.__all__) - set(PUBLIC) - NOT_RE_EXPORTED

    assert not missing
    for name in set(module.__all__) & set(PUBLIC):
        assert getattr(module, name) is getattr(grelmicro.jwt, name)


@pytest.mark.parametrize("module_name", [*USER_MODULES, "grelmicro.jwt._cache"])
def test_module_all_names_exist_and_are_sorted(module_name: str):
    module = importlib.import_module(module_name)

    assert list(module.__all__) == sorted(module.__all__, key=isort_style)
    for name in module.__all__:
        assert hasattr(module, name), name


def test_core_bridge_all_is_its_own_sorted_names_then_the_compiled_modules():
    from grelmicro_core import _core as compiled  # noqa: PLC0415

    from grelmicro.jwt import _core  # noqa: PLC0415

    own = _core.__all__[: len(_core.__all__) - len(compiled.__all__)]
    assert own == sorted(own, key=isort_style)
    assert _core.__all__ == [*own, *compiled.__all__]
    for name in _core.__all__:
        assert getattr(_core, name) is not None, name


def test_errors_are_exported_one_to_one():
    from grelmicro.jwt import errors  # noqa: PLC0415

    exported_errors = {
        name
        for name in PUBLIC
        if isinstance(getattr(grelmicro.jwt, name), type)
        and issubclass(getattr(grelmicro.jwt, name), errors.JWTError)
    }
    assert exported_errors == set(errors.__all__) - NOT_RE_EXPORTED


def documented_members(obj: type) -> list[tuple[str, object]]:
    members = []
    for name, value in vars(obj).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (classmethod, staticmethod)):
            members.append((name, value.__func__))
        elif isinstance(value, (property, types.FunctionType)):
            members.append((name, value))
    return members


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_has_a_docstring(name: str):
    obj = getattr(grelmicro.jwt, name)

    assert (inspect.getdoc(obj) or "").strip(), name
    assert obj.__doc__, name  # its own, not inherited
    if isinstance(obj, type):
        for member, value in documented_members(obj):
            assert (getattr(value, "__doc__", None) or "").strip(), f"{name}.{member}"


def test_package_docstring():
    assert (grelmicro.jwt.__doc__ or "").strip()
    assert "JWTVerifier" in (grelmicro.jwt.__doc__ or "")


def test_verify_is_documented_on_the_instance():
    from forge import SECRET  # noqa: PLC0415

    verifier = grelmicro.jwt.JWTVerifier([grelmicro.jwt.Key.secret(SECRET)])

    assert inspect.getdoc(grelmicro.jwt.VerifyFunction.__call__)
    assert callable(verifier.verify)


@pytest.mark.parametrize("module_name", OWN_MODULES)
def test_public_modules_list_and_document_their_names(module_name: str):
    module = importlib.import_module(module_name)

    assert (module.__doc__ or "").strip()
    assert list(module.__all__) == sorted(module.__all__, key=isort_style)
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and isinstance(value, (type, types.FunctionType))
        and value.__module__ == module_name
    }
    assert defined <= set(module.__all__)
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, (type, types.FunctionType)):
            assert obj.__doc__, name
        if isinstance(obj, type):
            for member, value in documented_members(obj):
                assert (getattr(value, "__doc__", None) or "").strip(), f"{name}.{member}"


def test_grant_checks_are_public():
    assert grelmicro.jwt.require_scopes.__module__ == "grelmicro.jwt._grants"
