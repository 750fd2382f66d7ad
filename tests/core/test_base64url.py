"""Compact serialization rules (design §4): three segments, strict base64url,
size cap.

Every mutated header or payload is signed again, so the only thing wrong
with the token is its encoding; mutated signatures cannot be re-signed and
must be refused before any cryptography is attempted.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import forge
import pytest
from grelmicro_core import KeySet, Policy, Verifier
from support import FRESH, NOW, hs256, key_for, kind_of, rejection

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

# Chosen so that their encodings have spare bits (length % 4 == 3) and their
# standard-alphabet encodings differ ('>>>' gives '+', '???' gives '/').
HEADER = {"alg": "HS256", "kid": "k1", "x": ">>>???!"}
PAYLOAD = {**FRESH, "note": ">>>???!"}


def with_spare_bits(segment: str) -> str:
    """Same bytes for a lenient decoder, but the unused low bits are set."""
    assert len(segment) % 4 in (2, 3), "segment has no spare bits"
    last = ALPHABET.index(segment[-1])
    return segment[:-1] + ALPHABET[last | 1]


def standard_alphabet(segment: str) -> str:
    raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    return base64.standard_b64encode(raw).decode("ascii").rstrip("=")


def padded(segment: str) -> str:
    return segment + "=" * ((-len(segment) % 4) or 4)


MUTATIONS: dict[str, Callable[[str], str]] = {
    "padding": padded,
    "standard-alphabet": standard_alphabet,
    "spare-bits-set": with_spare_bits,
    "space-inside": lambda s: s[:5] + " " + s[5:],
    "newline-inside": lambda s: s[:5] + "\n" + s[5:],
    "tab-inside": lambda s: s[:5] + "\t" + s[5:],
    "leading-space": lambda s: " " + s,
    "trailing-newline": lambda s: s + "\n",
    "invalid-character": lambda s: s[:5] + "?" + s[5:],
    "percent-encoded": lambda s: s[:5] + "%3D" + s[5:],
    "length-1-mod-4": lambda s: s + "A" * ((1 - len(s)) % 4 or 4),
}


def test_mutations_change_the_segments() -> None:
    """Guard for the table below: every mutation really alters the text."""
    header, payload, _ = hs256()[0].mint(PAYLOAD, header=HEADER).split(".")
    for name, mutate in MUTATIONS.items():
        assert mutate(header) != header, name
        assert mutate(payload) != payload, name


@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("mutated", ["header", "payload"])
def test_header_and_payload_encoding_is_strict(mutated: str, mutation: str) -> None:
    sig, check = hs256()
    segments = {"header": forge.segment(HEADER), "payload": forge.segment(PAYLOAD)}
    segments[mutated] = MUTATIONS[mutation](segments[mutated])
    signing_input = f"{segments['header']}.{segments['payload']}"

    assert rejection(check, forge.signed(signing_input, sig.private, "HS256")) == "malformed"


@pytest.mark.parametrize("mutation", sorted(set(MUTATIONS) - {"standard-alphabet"}))
def test_signature_encoding_is_strict(mutation: str) -> None:
    sig, check = hs256()
    header, payload, signature = sig.mint(PAYLOAD, header=HEADER).split(".")
    assert len(signature) == 43  # 32 bytes: two spare bits in the last character

    assert rejection(check, f"{header}.{payload}.{signature}") == "ok"
    assert rejection(check, f"{header}.{payload}.{MUTATIONS[mutation](signature)}") == "malformed"


@pytest.mark.parametrize(
    "shape",
    [
        "",
        ".",
        "..",
        "a",
        "a.b",
        "a.b.",
        ".b.c",
        "a..c",
        "a.b.c.d",
        "a.b.c.d.e.f",
        "   ",
    ],
)
def test_token_shape(shape: str) -> None:
    _, check = hs256()

    assert rejection(check, shape) == "malformed"


def test_segments_must_be_three_even_when_valid_ones_are_appended() -> None:
    sig, check = hs256()
    token = sig.mint(FRESH)

    assert rejection(check, token + "." + token.split(".")[2]) == "malformed"
    assert rejection(check, token + ".") == "malformed"
    assert rejection(check, "." + token) == "malformed"


def test_str_and_bytes_are_the_same_token() -> None:
    sig, check = hs256()
    token = sig.mint(FRESH)

    assert check.verify(token, NOW) == check.verify(token.encode("ascii"), NOW)


@pytest.mark.parametrize("token", [123, None, 1.5, ["a.b.c"], "é.é.é", b"\xff.\xfe.\xfd"])
def test_tokens_of_other_types_or_non_ascii_are_malformed(token: object) -> None:
    _, check = hs256()

    assert kind_of(check.verify, token, NOW) == "malformed"


def test_size_cap_boundary() -> None:
    sig, _ = hs256()
    token = sig.mint(FRESH)
    keys = KeySet([key_for(sig)])
    exact = Verifier(keys, Policy(max_token_size=len(token)))
    short = Verifier(keys, Policy(max_token_size=len(token) - 1))

    assert rejection(exact, token) == "ok"
    assert rejection(short, token) == "too-large"
    # The cap is checked before anything else: garbage over the cap is too large.
    assert rejection(short, "x" * len(token)) == "too-large"


def test_default_size_cap_is_8_kib() -> None:
    sig, check = hs256()
    tokens = [sig.mint({**FRESH, "pad": "p" * n}) for n in range(6000, 6200)]
    fits = max((t for t in tokens if len(t) <= 8192), key=len)
    over = min((t for t in tokens if len(t) > 8192), key=len)

    assert Policy().max_token_size == 8192
    assert len(fits) >= 8190
    assert rejection(check, fits) == "ok"
    assert rejection(check, over) == "too-large"
