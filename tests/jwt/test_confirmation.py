"""The one reader of ``cnf`` (RFC 7800): what a token asks its holder to prove."""

from __future__ import annotations

from typing import Any

import pytest

from grelmicro.jwt import BindingError, UncheckedBindingError
from grelmicro.jwt._confirmation import UNBOUND, Confirmation, confirmation

JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
X5T = "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({}, UNBOUND),
        ({"cnf": None}, UNBOUND),
        ({"cnf": {"jkt": JKT}}, Confirmation(jkt=JKT)),
        ({"cnf": {"x5t#S256": X5T}}, Confirmation(x5t_s256=X5T)),
        ({"cnf": {"jkt": JKT, "x5t#S256": X5T}}, Confirmation(JKT, X5T)),
        ({"cnf": {"jwk": {"kty": "OKP"}}}, Confirmation(others=("jwk",))),
        ({"cnf": {"kid": "k", "jkt": JKT}}, Confirmation(jkt=JKT, others=("kid",))),
        ({"cnf": {"\u00e9\n" * 40: 1}}, Confirmation(others=(("\\xe9\\n" * 40)[:32],))),
    ],
    ids=["no-cnf", "null-cnf", "jkt", "x5t", "both", "jwk", "kid-and-jkt", "escaped-name"],
)
def test_confirmation_reads_every_method(claims: dict[str, Any], expected: Confirmation):
    assert confirmation(claims) == expected


@pytest.mark.parametrize(
    ("cnf", "check"),
    [
        ("jkt", "cnf"),
        (["jkt"], "cnf"),
        ({}, "cnf"),
        ({"jkt": None}, "cnf"),
        ({"jkt": ""}, "jkt"),
        ({"jkt": 5}, "jkt"),
        ({"x5t#S256": "short"}, "x5t#S256"),
        ({"x5t#S256": X5T + "="}, "x5t#S256"),
        ({"x5t#S256": ["x"]}, "x5t#S256"),
    ],
)
def test_a_cnf_that_cannot_be_read_is_refused(cnf: object, check: str):
    with pytest.raises(BindingError) as caught:
        confirmation({"cnf": cnf})

    assert caught.value.reason == "binding"
    assert caught.value.check == check


@pytest.mark.parametrize(
    ("bound", "checked", "method"),
    [
        (UNBOUND, (), None),
        (Confirmation(jkt=JKT), ("jkt",), None),
        (Confirmation(jkt=JKT), (), "jkt"),
        (Confirmation(JKT, X5T), ("jkt",), "x5t#S256"),
        (Confirmation(JKT, X5T), ("jkt", "x5t#S256"), None),
        (Confirmation(jkt=JKT, others=("jwk",)), ("jkt", "x5t#S256"), "jwk"),
    ],
)
def test_every_method_must_be_checked(
    bound: Confirmation, checked: tuple[str, ...], method: str | None
):
    refused = bound.unchecked(checked)

    if method is None:
        assert refused is None
    else:
        assert isinstance(refused, UncheckedBindingError)
        assert (refused.reason, refused.method) == ("unchecked-binding", method)
