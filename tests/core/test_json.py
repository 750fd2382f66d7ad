"""JSON rules for the payload (design §4): UTF-8 only, no duplicate members,
capped depth, exact integers, no lone surrogates, an object at the top.

Payloads are written as raw JSON text and signed, so only the JSON is at
fault when a token is refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import NOW, hs256, rejection

EXP = f'"exp":{NOW + 60}'


def token_for(payload: str | bytes, **policy: Any) -> tuple[str, Any]:
    sig, check = hs256(**policy)
    return sig.mint(payload), check


@pytest.mark.parametrize(
    "payload",
    [
        f'{{{EXP},"a":1,"a":2}}',
        f'{{{EXP},"exp":{NOW + 60}}}',
        f'{{{EXP},"sub":"x","sub":"x"}}',
        f'{{{EXP},"a":1,"\\u0061":1}}',
        f'{{{EXP},"o":{{"k":1,"k":1}}}}',
        f'{{{EXP},"l":[{{"k":1}},{{"k":1,"k":2}}]}}',
        f'{{{EXP},"custom":null,"custom":null}}',
    ],
)
def test_duplicate_members_are_refused(payload: str) -> None:
    token, check = token_for(payload)

    assert rejection(check, token) == "malformed"


def nested(levels: int) -> str:
    """A payload nested ``levels`` deep in arrays, counting the top-level object."""
    inner = "[" * (levels - 1) + "]" * (levels - 1)
    return f'{{{EXP},"d":{inner}}}' if levels > 1 else f"{{{EXP}}}"


def nested_objects(levels: int) -> str:
    """The same depth made of objects."""
    if levels == 1:
        return f"{{{EXP}}}"
    inner = '{"d":' * (levels - 2) + "{}" + "}" * (levels - 2)
    return f'{{{EXP},"d":{inner}}}'


@pytest.mark.parametrize(
    ("max_depth", "levels", "expected"),
    [
        (None, 64, "ok"),
        (None, 65, "too-large"),
        (8, 8, "ok"),
        (8, 9, "too-large"),
        (2, 2, "ok"),
        (2, 3, "too-large"),
    ],
)
def test_depth_cap(max_depth: int | None, levels: int, expected: str) -> None:
    policy = {} if max_depth is None else {"max_depth": max_depth}
    arrays, check = token_for(nested(levels), **policy)
    objects, _ = token_for(nested_objects(levels), **policy)

    assert rejection(check, arrays) == expected
    assert rejection(check, objects) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", 2**63),
        ("-9223372036854775809", -(2**63) - 1),
        ("1180591620717411303424", 2**70),
        ("-1180591620717411303424", -(2**70)),
        ("123456789012345678901234567890123456789", 123456789012345678901234567890123456789),
        ("0", 0),
        ("-0", 0),
    ],
)
def test_integers_are_exact(text: str, expected: int) -> None:
    token, check = token_for(f'{{{EXP},"n":{text},"l":[{text}],"o":{{"n":{text}}}}}')

    claims = check.verify(token, NOW)

    assert type(claims["n"]) is int
    assert claims["n"] == expected
    assert claims["l"] == (expected,)
    assert claims["o"]["n"] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5", 1.5), ("-0.0", -0.0), ("1e-7", 1e-7), ("2.5E3", 2500.0), ("1.0", 1.0)],
)
def test_floats_stay_floats(text: str, expected: float) -> None:
    token, check = token_for(f'{{{EXP},"f":{text}}}')

    value = check.verify(token, NOW)["f"]

    assert type(value) is float
    assert value == expected


@pytest.mark.parametrize(
    "string",
    [
        "\\ud800",
        "\\udfff",
        "\\udc00\\ud800",
        "x\\ud83dy",
        "\\ud83d\\u0041",
        "\\ud83d\\ud83d",
    ],
)
def test_lone_surrogates_are_refused(string: str) -> None:
    token, check = token_for(f'{{{EXP},"s":"{string}"}}')

    assert rejection(check, token) == "malformed"


def test_surrogate_pairs_and_escapes_decode() -> None:
    token, check = token_for(f'{{{EXP},"s":"\\ud83d\\ude00 \\u00e9\\n\\"\\/\\\\","\\u0074":"t"}}')

    claims = check.verify(token, NOW)

    assert claims["s"] == '\U0001f600 é\n"/\\'
    assert claims["t"] == "t"


@pytest.mark.parametrize(
    "payload",
    [
        b'{"exp":1,"s":"\xff"}',
        b'{"exp":1,"s":"\xc0\xaf"}',
        b'{"exp":1,"s":"\xed\xa0\x80"}',
        b'{"exp":1,"s":"\xe2\x82"}',
        b'{"exp":1,"\xff":1}',
        b'\xef\xbb\xbf{"exp":1}',
    ],
)
def test_payload_must_be_utf8_json(payload: bytes) -> None:
    token, check = token_for(payload)

    assert rejection(check, token, 0) == "malformed"


def test_raw_utf8_is_fine() -> None:
    token, check = token_for(f'{{{EXP},"name":"Zoë 名前 🙂"}}'.encode())

    assert check.verify(token, NOW)["name"] == "Zoë 名前 🙂"


@pytest.mark.parametrize(
    "payload",
    [
        "[1]",
        '"claims"',
        "1",
        "null",
        "true",
        "",
        f"{{{EXP}}} {{}}",
        f"{{{EXP}}}x",
        f"{{{EXP},}}",
        f"{{{EXP},'a':1}}",
        f'{{{EXP},"a":NaN}}',
        f'{{{EXP},"a":Infinity}}',
        f'{{{EXP},"a":-Infinity}}',
        f'{{{EXP},"a":01}}',
        f'{{{EXP},"a":.5}}',
        f'{{{EXP},"a":1.}}',
        f'{{{EXP},"a":+1}}',
        f'{{{EXP},"a":0x10}}',
        f"{{{EXP} /* comment */}}",
        f'{{{EXP},"a":"tab\there"}}',
        f'{{{EXP},"a":"\\x41"}}',
        f'{{{EXP},"a":"\\u00"}}',
        f'{{{EXP},"a":[1,]}}',
        f'{{{EXP},"a":tru}}',
        f"{{{EXP}",
    ],
)
def test_payload_json_is_strict(payload: str) -> None:
    token, check = token_for(payload)

    assert rejection(check, token) == "malformed"


def test_whitespace_around_json_is_allowed() -> None:
    token, check = token_for(f' \n{{ {EXP} , "a" : [ 1 , 2 ] }}\t\r\n')

    assert check.verify(token, NOW)["a"] == (1, 2)


def test_member_order_is_kept() -> None:
    token, check = token_for(f'{{"z":1,{EXP},"a":2,"m":3}}')

    assert list(check.verify(token, NOW)) == ["z", "exp", "a", "m"]


# -- The payload into Python objects (python/raw.rs) ---------------------------
#
# Strings are copied straight into one-byte Python strings when they are
# ASCII, and the top-level dict is made as large as the last payload's; both
# must give exactly what json.loads gives, whatever the text and layout.

TEXTS = [
    "",
    "a",
    "plain ascii text with spaces and punctuation !#$%&()*+,-./:;<=>?@[]^_`{|}~",
    "x" * 2000,
    "caf\u00e9",
    "\u540d\u524d",
    "\U0001f600 emoji",
    "tab\tnew\nline\u0000nul",
    'quote " and backslash \\',
    "\u007f\u0080",
]


@pytest.mark.parametrize("text", TEXTS)
def test_string_values_decode_exactly(text: str) -> None:
    payload = json.dumps({"exp": NOW + 60, "s": text, "l": [text, text]}, ensure_ascii=False)
    sig, check = hs256()

    claims = check.verify(sig.mint(payload.encode()), NOW)

    assert claims["s"] == text
    assert type(claims["s"]) is str
    assert claims["l"] == (text, text)
    assert len(claims["s"]) == len(text)
    assert claims["s"].isascii() == text.isascii()


def test_payload_layouts_may_change_from_token_to_token() -> None:
    sig, check = hs256()
    layouts = [1, 40, 0, 6, 5, 11, 300, 2, 11, 11]

    for extra in layouts:
        members = {f"c{i}": i for i in range(extra)}
        payload = {"exp": NOW + 60, **members}

        claims = check.verify(sig.mint(json.dumps(payload)), NOW)

        assert claims == payload
        assert list(claims) == list(payload)


def test_a_duplicate_is_refused_whatever_room_the_last_layout_made() -> None:
    sig, check = hs256()
    wide = "{" + EXP + "".join(f',"c{i}":{i}' for i in range(20)) + "}"
    assert rejection(check, sig.mint(wide)) == "ok"

    assert rejection(check, sig.mint(f'{{{EXP},"a":1,"a":2}}')) == "malformed"
