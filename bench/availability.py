"""Availability under provider faults, in real time: the figures of issue 31's "done when".

    .venv/bin/python bench/availability.py            # every scenario (about 2.5 minutes)
    .venv/bin/python bench/availability.py startup    # one: startup, rotation or outage

An async app with ``await verifier.start()`` and default options, keys from
a loopback JWKS server (the test suite's ``DocumentServer``), tokens signed
with the test suite's ``forge`` minting (ES256 keys: ``cryptography``). No
pytest. It needs this tree's ``tests/`` folder, ``httpx``, ``cryptography``
and grelmicro with its core built from this tree; the dev venv
(``bash scripts/setup.sh``) has them all, and the script says what is
missing and how to install it before it starts.

- **startup**: the provider answers 503 for 20 s (then 45 s) from the
  start; when does the first verification succeed after it returns, and how
  many requests did it see meanwhile?
- **rotation**: four tasks send invented ``kid`` values as fast as they
  can; an unannounced key is published at a random moment of a 10 s
  window; how long until its token is accepted, and how many requests did
  the provider see in the window: the measured rate, printed beside the
  pace the options promise (``unknown_kid_budget`` per
  ``unknown_kid_interval``: one a second by default; 10 s is ten paces, so
  the rate is read to about one request in ten). Five runs.
- **outage**: the same flood; the provider answers 503 for 15 s and a new
  key is published in the middle of it; do tokens of the held key keep
  verifying, and when is the new key accepted after the return?

Printed: one line per run. Real time on a shared machine: read the
figures against the promises (1.5 s, 2.5 s, about one request a second),
not as timings to compare.
"""

# A bench driver: it prints.
from __future__ import annotations

import asyncio
import contextlib
import importlib
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: What this script imports beyond the standard library and ``tests/``: module, package.
NEEDS = (
    ("grelmicro.jwt", "grelmicro"),
    ("grelmicro_core", "grelmicro-core"),
    ("httpx", "httpx"),
    ("cryptography", "cryptography"),
)
#: Packages that come from this tree only: another project owns their names on PyPI.
OURS = frozenset({"grelmicro", "grelmicro-core"})


def require() -> None:
    """Exit with what is missing and how to install it, before anything runs."""
    missing = []
    for module, package in NEEDS:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if not missing:
        return
    lines = [f"bench/availability.py needs {', '.join(missing)}, not importable here."]
    if OURS & set(missing):
        lines.append(
            "  grelmicro and grelmicro-core come from this tree, never from a package index "
            "(another project owns those names): bash scripts/setup.sh (builds the core, "
            "installs grelmicro[jwt] with pip install -e), then run .venv/bin/python."
        )
    if set(missing) - OURS:
        lines.append(
            "  The others, pinned, into the venv that has grelmicro from this tree: "
            "python -m pip install -r scripts/requirements-dev.txt "
            "(cryptography: also the grelmicro[testing] extra)."
        )
    print("\n".join(lines), file=sys.stderr)
    raise SystemExit(2)


require()
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "jwt")]

from forge import NOW, Signer, generate  # noqa: E402 - the test suite's token maker
from servers import DocumentServer, jwks_of  # noqa: E402 - the test suite's JWKS server

from grelmicro.jwt import (  # noqa: E402
    FetchOptions,
    JWTVerifier,
    KeysUnavailableError,
    TokenRejectedError,
)

JWKS = "/jwks.json"
#: The rotation scenario's window: long enough to count the unknown-kid pace (ten of them).
WINDOW = 10.0


def es256(kid: str) -> Signer:
    """A fresh ES256 signer under ``kid`` (``cryptography``)."""
    return Signer("ES256", generate("ES256"), kid, "JWT")


def promised_rate() -> float:
    """JWKS requests a second an unknown-kid flood may cause, by the default options."""
    options = FetchOptions()
    interval = (
        options.cooldown if options.unknown_kid_interval is None else options.unknown_kid_interval
    )
    return options.unknown_kid_budget / interval if interval else float("inf")


def mint(key: Signer, **claims: Any) -> str:
    return key.mint({"aud": "a", "iss": "i", "exp": NOW + 600, **claims})


def verifier_over(server: DocumentServer) -> JWTVerifier:
    return JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        audience="a",
        issuer="i",
        clock=lambda: NOW,
    )


async def startup(down: float) -> str:
    key = es256("k1")
    server = DocumentServer().start()
    server.set(JWKS, "down", status=503)
    verifier = verifier_over(server)
    token = mint(key)
    try:
        await verifier.start()
        started, back = time.monotonic(), 0.0
        while True:
            now = time.monotonic()
            if not back and now - started >= down:
                server.set(JWKS, jwks_of(key))
                back = now
            try:
                await verifier.verify_async(token)
            except KeysUnavailableError:
                await asyncio.sleep(0.02)
                continue
            if back:
                return (
                    f"startup, down {down:.0f} s: first success {now - back:.2f} s after the "
                    f"provider returned; {server.count(JWKS)} JWKS requests in all"
                )
    finally:
        await verifier.aclose()
        server.stop()


async def flooded(outage: float) -> str:
    k1, k2 = es256("k1"), es256("k2")
    server = DocumentServer().start()
    server.set(JWKS, jwks_of(k1))
    verifier = verifier_over(server)
    junk = [mint(es256(f"junk{i}")) for i in range(20)]
    sent = 0
    stop = asyncio.Event()

    async def flood() -> None:
        nonlocal sent
        while not stop.is_set():
            with contextlib.suppress(KeysUnavailableError, TokenRejectedError):
                await verifier.verify_async(junk[sent % len(junk)])
            sent += 1
            await asyncio.sleep(0)

    try:
        await verifier.start()
        tasks = [asyncio.create_task(flood()) for _ in range(4)]
        await asyncio.sleep(1)  # the flood reaches its pace
        before, started, held_failed = server.count(JWKS), time.monotonic(), 0
        if outage:
            server.set(JWKS, "down", status=503)
            await asyncio.sleep(outage / 2)
            half = time.monotonic()
            while time.monotonic() - half < outage / 2:  # the new key is published now
                try:
                    await verifier.verify_async(mint(k1, jti=str(time.monotonic())))
                except KeysUnavailableError:
                    held_failed += 1
                await asyncio.sleep(0.02)
        else:
            await asyncio.sleep(2 + random.random() * (WINDOW - 5))  # a random moment
        server.set(JWKS, jwks_of(k1, k2))
        published = time.monotonic()
        while True:
            try:
                await verifier.verify_async(mint(k2, jti=str(time.monotonic())))
                break
            except KeysUnavailableError:
                await asyncio.sleep(0.02)
        took = time.monotonic() - published
        if not outage:  # the flood goes on to the end of the window: the pace, counted
            await asyncio.sleep(max(started + WINDOW - time.monotonic(), 0.0))
        span = time.monotonic() - started
        fetched = server.count(JWKS) - before
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await verifier.aclose()
        server.stop()
    what = "the provider's return" if outage else "publication"
    line = (
        f"new key accepted {took:.2f} s after {what}; {sent:,} invented-kid verifications; "
        f"{fetched} JWKS requests in {span:.1f} s ({fetched / span:.2f}/s"
    )
    if outage:
        return f"outage {outage:.0f} s: {line}); held-key tokens refused meanwhile: {held_failed}"
    return f"rotation under a flood: {line}, promised: at most {promised_rate():.2f}/s)"


SCENARIOS: dict[str, Callable[[], list[Any]]] = {
    "startup": lambda: [startup(20), startup(45)],
    "rotation": lambda: [flooded(0) for _ in range(5)],
    "outage": lambda: [flooded(15)],
}


def main(argv: list[str]) -> int:
    names = argv or list(SCENARIOS)
    for name in names:
        for run in SCENARIOS[name]():
            print(asyncio.run(run), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
