"""Availability under provider faults, in real time: the figures of issue 31's "done when".

    .venv/bin/python bench/availability.py            # every scenario (about 2 minutes)
    .venv/bin/python bench/availability.py startup    # one: startup, rotation or outage

An async app with ``await verifier.start()`` and default options, keys from
a loopback JWKS server (the test suite's ``DocumentServer``), tokens made
by the test suite's ``forge`` (``cryptography``: the dev venv has it).

- **startup**: the provider answers 503 for 20 s (then 45 s) from the
  start; when does the first verification succeed after it returns, and how
  many requests did it see meanwhile?
- **rotation**: four tasks send invented ``kid`` values as fast as they
  can; an unannounced key is published at a random moment; how long until
  its token is accepted, and how many requests did the provider see? (five
  runs)
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
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "jwt")]

from forge import NOW, Signer, private_key  # noqa: E402 - the test suite's token maker
from servers import DocumentServer, jwks_of  # noqa: E402 - the test suite's JWKS server

from grelmicro.jwt import JWTVerifier, KeysUnavailableError, TokenRejectedError  # noqa: E402

JWKS = "/jwks.json"


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
    key = private_key("ES256", kid="k1", seed=3)
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
    k1, k2 = private_key("ES256", kid="k1", seed=3), private_key("ES256", kid="k2", seed=4)
    server = DocumentServer().start()
    server.set(JWKS, jwks_of(k1))
    verifier = verifier_over(server)
    junk = [mint(private_key("ES256", kid=f"junk{i}", seed=100 + i)) for i in range(20)]
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
        await asyncio.sleep(2 + random.random())
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
        server.set(JWKS, jwks_of(k1, k2))
        published = time.monotonic()
        while True:
            try:
                await verifier.verify_async(mint(k2, jti=str(time.monotonic())))
                break
            except KeysUnavailableError:
                await asyncio.sleep(0.02)
        took, span = time.monotonic() - published, time.monotonic() - started
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await verifier.aclose()
        server.stop()
    what = "the provider's return" if outage else "publication"
    line = (
        f"new key accepted {took:.2f} s after {what}; {sent:,} invented-kid verifications; "
        f"{server.count(JWKS) - before} JWKS requests in {span:.1f} s"
    )
    if outage:
        return f"outage {outage:.0f} s: {line}; held-key tokens refused meanwhile: {held_failed}"
    return f"rotation under a flood: {line}"


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
