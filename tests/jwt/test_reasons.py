"""One reason table: ``errors.REASONS`` is what every other list of reasons is read from."""

from __future__ import annotations

import pytest

from grelmicro.jwt import _core
from grelmicro.jwt.errors import REASONS, TokenRejectedError


def test_kind_to_error_is_reasons_restricted_to_the_core_kinds():
    assert {kind: REASONS[kind] for kind in _core.error_kinds()} == _core.KIND_TO_ERROR


def test_every_class_is_listed_under_its_own_reason():
    for reason, cls in REASONS.items():
        assert cls.reason == reason
    with pytest.raises(TypeError):
        REASONS["new"] = TokenRejectedError  # type: ignore[index]


def test_problem_body_details_are_for_known_reasons():
    fastapi = pytest.importorskip("grelmicro.jwt.fastapi")
    fastapi_dpop = pytest.importorskip("grelmicro.jwt.fastapi._dpop")

    for reason in fastapi._DETAILS:
        assert issubclass(REASONS[reason], TokenRejectedError), reason
    # use-dpop-nonce is RFC 9449's error code for a missing nonce, not a class.
    for reason in set(fastapi_dpop._DETAILS) - {"use-dpop-nonce"}:
        assert issubclass(REASONS[reason], TokenRejectedError), reason
