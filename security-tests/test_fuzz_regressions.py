"""Fuzzing regressions and seeds, replayed through the installed package.

Attack class: whatever the fuzzers found. Every crash a fuzzer reports is
kept as a file (``grelmicro-core/fuzz/regressions/<target>/`` for the Rust
targets, ``security-tests/fuzz/regressions/`` for the atheris harness) and
replayed here through the public API with the fuzzers' own key set and
policies; the committed seed corpora are replayed too. An input may be
accepted or refused, but only ever with our error taxonomy.

References: libFuzzer / cargo-fuzz / atheris documentation (crash artifacts
and corpus replay); security-tests/README.md "Fuzzing".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import support

from grelmicro.jwt import JWTError, JWTVerifier, Key

REPO = Path(__file__).resolve().parents[1]
FUZZ = REPO / "grelmicro-core" / "fuzz"


def _files(*folders: Path) -> list[Path]:
    return sorted(
        p for folder in folders if folder.is_dir() for p in folder.iterdir() if p.is_file()
    )


TOKEN_INPUTS = _files(
    FUZZ / "seeds" / "verify",
    FUZZ / "regressions" / "verify",
    REPO / "security-tests" / "fuzz" / "regressions",
)
JWKS_INPUTS = _files(FUZZ / "seeds" / "jwks", FUZZ / "regressions" / "jwks")
VERIFIERS = support.fuzz_verifiers(cache_size=0) + support.fuzz_verifiers()


def test_inputs_are_present() -> None:
    assert len([p for p in TOKEN_INPUTS if p.stat().st_size]) >= 10
    assert len([p for p in JWKS_INPUTS if p.stat().st_size]) >= 5


@pytest.mark.parametrize("path", TOKEN_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_token_input_replays(path: Path) -> None:
    data = path.read_bytes()
    answers = []
    for verifier in VERIFIERS:
        for token in (data, data.decode("utf-8", "surrogateescape")):
            kind, result = support.outcome(verifier, token)
            answers.append(result if kind == "rejected" else "accepted")
            if kind == "accepted":
                assert isinstance(result["exp"], (int, float))
    # Cached and uncached verifiers with the same policy agree.
    assert answers[:4] == answers[4:]


@pytest.mark.parametrize("path", JWKS_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_jwks_input_replays(path: Path) -> None:
    data = path.read_bytes()
    for allow_symmetric in (False, True):
        options = {"allow_symmetric": allow_symmetric}
        assert _build(lambda o=options: JWTVerifier(jwks=data, **o)) in BUILD
        assert _build(lambda o=options: Key.jwk(data, **o)) in BUILD


BUILD = {"built", "invalid-key", "weak-key", "invalid-config"}


def _build(make: Callable[[], object]) -> str:
    """``"built"`` or the reason of the build-time error (anything else propagates)."""
    try:
        make()
    except JWTError as exc:
        return exc.reason
    return "built"
