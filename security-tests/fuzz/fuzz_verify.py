"""Atheris harness for the Python entry point, ``JWTVerifier.verify``.

Every input is verified as ``bytes`` and (when it is UTF-8, or decoded with
``surrogateescape`` otherwise) as ``str``, by four verifiers: the two fixed
policies of ``support.fuzz_verifiers`` (the same keys and policies as the
Rust target ``grelmicro-core/fuzz/fuzz_targets/verify.rs``), each with the
cache off and on. A crash is:

- any exception other than :class:`TokenRejectedError` (a 500 in a service);
- a rejection whose ``reason`` is not one of the documented ones, or whose
  class is not the one for that reason;
- ``str`` and ``bytes`` forms of valid UTF-8 getting different answers;
- the cached and uncached verifiers getting different answers;
- an accepted token whose claims break the policy (``aud``, ``iss``).

Run (see security-tests/README.md):

    python security-tests/fuzz/fuzz_verify.py -max_total_time=60 \\
        CORPUS_DIR grelmicro-core/fuzz/seeds/verify

Python code of ``grelmicro`` is instrumented for coverage; the compiled core
is not (atheris cannot instrument a Rust extension), so the Rust target is
where the core's coverage-guided fuzzing happens.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[2] / "tests"))  # the one token forge

with atheris.instrument_imports(include=["grelmicro"]):
    import grelmicro.jwt  # noqa: F401 - instrumented for coverage

import support

UNCACHED = support.fuzz_verifiers(cache_size=0)
CACHED = support.fuzz_verifiers(cache_size=64)


def check_accepted(index: int, result: tuple[str, Any]) -> None:
    kind, claims = result
    if kind != "accepted":
        return
    if not isinstance(claims.get("exp"), (int, float)) or isinstance(claims.get("exp"), bool):
        raise AssertionError("accepted without a numeric exp")
    if index == 0:
        aud = claims.get("aud")
        if claims.get("iss") != "fuzz-iss" or not (
            aud == "fuzz-aud" or (isinstance(aud, list) and "fuzz-aud" in aud)
        ):
            raise AssertionError(f"accepted against the policy: {claims!r}")


def test_one_input(data: bytes) -> None:
    """One fuzz input (the atheris entry point)."""
    try:
        text = data.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")
        utf8 = False
    for index, (uncached, cached) in enumerate(zip(UNCACHED, CACHED, strict=True)):
        from_bytes = support.outcome(uncached, data)
        check_accepted(index, from_bytes)
        if support.outcome(cached, data) != from_bytes:
            raise AssertionError("cached and uncached verifiers disagree")
        from_text = support.outcome(uncached, text)
        if utf8 and from_text != from_bytes:
            raise AssertionError(f"str and bytes disagree: {from_text} != {from_bytes}")
        if not utf8 and from_text[0] != "rejected":
            raise AssertionError("a str with lone surrogates was accepted")
        support.outcome(cached, text)


def main() -> None:
    """Run atheris with the command-line arguments (libFuzzer flags)."""
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
