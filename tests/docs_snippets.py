"""Run the Python examples of the documentation, page by page.

``python tests/docs_snippets.py PAGE`` extracts every fenced ``python`` block
of ``PAGE`` (a Markdown file under ``docs/`` or ``README.md``) and runs them
in order, in one namespace, the way a reader pastes them into one session.
A block may use top-level ``await``. ``tests/test_docs_snippets.py`` runs
this for every page, in a subprocess each, with a time limit.

The namespace starts with the names below (the "documented fixture", see
``docs/getting-started.md``): keys made here with ``cryptography`` and tokens
signed by hand, never by grelmicro, so a page's example cannot pass by
verifying its own output.

- ``now``: the current time, seconds since the epoch (``int``);
- ``secret``: a 32-byte HMAC secret; ``hs_token``: an HS256 token signed
  with it (``kid`` ``"k1"``);
- ``public_pem`` (= ``rsa_public_pem``): the public half of an RSA-2048 key in
  PEM; ``next_rsa_public_pem``: a second RSA public key; ``jwks``: a JWKS
  document (dict) holding the first one under ``kid`` ``"k1"``;
- ``token``: an RS256 token from that key; ``expired_token``: the same, expired;
- ``mint(alg="RS256", kid=..., **claims)``: a fresh token from these keys,
  claims merged over the default payload (a claim set to ``None`` is left out);
- ``MyModel`` (pydantic) and ``MyStruct`` (msgspec): two classes with ``sub``
  and ``email`` fields.

Default payload: ``iss`` ``https://idp.example.com/``, ``aud``
``https://api.example.com``, ``sub``, ``iat``/``nbf`` now, ``exp`` in one hour,
``jti``, ``scope`` ``"read:items write:items"``, ``email``, ``name``, ``roles``.

A block is skipped only when the line before its fence (blank lines aside)
is ``<!-- snippet: skip (a reason) -->``. A block after
``<!-- snippet: file examples/PATH -->`` is that file of the repository, whole:
it must equal the file byte for byte and is not run in the page's namespace
(its own test runs it, under its real server).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import hmac
import inspect
import re
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grelmicro.jwt._demo import b64url, canonical_payload
from grelmicro.jwt._demo import mint as demo_mint

ROOT = Path(__file__).resolve().parent.parent

ISSUER = "https://idp.example.com/"
AUDIENCE = "https://api.example.com"

#: Pages whose examples name a different ``kid`` for the fixture's RSA key.
PAGE_KID = {"docs/guide.md": "2026-11"}

_FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\n`]*)$")
_SKIP = re.compile(r"^<!--\s*snippet:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->$")
_FILE = re.compile(r"^<!--\s*snippet:\s*file\s+(?P<path>\S+)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced ``python`` block of a page."""

    page: str
    line: int  # 1-based line of the opening fence
    code: str
    skip_reason: str | None
    file: str | None = None  # the repository file this block is, whole


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def relative(path: Path) -> str:
    """The page's path relative to the repository root, with ``/`` (or as given)."""
    resolved = path.resolve()
    if resolved.is_relative_to(ROOT):
        return resolved.relative_to(ROOT).as_posix()
    return resolved.as_posix()


def extract(path: Path) -> list[Block]:
    """Every fenced block whose info string starts with ``python`` or ``py``, and every
    block marked as a repository file (any language)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = (opening["info"].split() or [""])[0].lower().lstrip(".{")
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:] if lines[end][:indent].isspace() else lines[end])
            end += 1
        file = _marker(lines, index, _FILE, "path")
        if language in {"python", "py"} or file is not None:
            code = "\n".join(body) + "\n"
            reason = _marker(lines, index, _SKIP, "reason")
            blocks.append(Block(relative(path), index + 1, code, reason, file))
        index = end + 1
    return blocks


def _marker(lines: list[str], fence: int, pattern: re.Pattern[str], group: str) -> str | None:
    """The ``group`` of the ``pattern`` comment on the line before a fence (blank lines aside)."""
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    if before < 0:
        return None
    marker = pattern.match(lines[before].strip())
    return marker[group].strip() if marker else None


def file_mismatch(block: Block) -> str | None:
    """Why a ``snippet: file`` block is not its file (None when it is, byte for byte)."""
    assert block.file is not None
    path = ROOT / block.file
    if not path.is_file():
        return f"{block.page}:{block.line} names {block.file}, which does not exist"
    if path.read_text(encoding="utf-8") != block.code:
        return f"{block.page}:{block.line} is not {block.file} as committed (copy the file in)"
    return None


# -- the fixture -------------------------------------------------------------------


def _int_b64(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def fixture(page: str) -> dict[str, Any]:
    """The names every example of ``page`` may use (see the module docstring)."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import (  # noqa: PLC0415
        ec,
        ed25519,
        padding,
        rsa,
    )
    from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
        decode_dss_signature,
    )

    now = int(time.time())
    kid = PAGE_KID.get(page, "k1")
    secret = hashlib.sha256(b"grelmicro docs example secret").digest()
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    next_rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = ed25519.Ed25519PrivateKey.generate()

    def pem(key: Any) -> bytes:
        encoded: bytes = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return encoded

    def sign(alg: str, data: bytes) -> bytes:
        if alg == "HS256":
            return hmac.new(secret, data, hashlib.sha256).digest()
        if alg == "RS256":
            signature: bytes = rsa_key.sign(data, padding.PKCS1v15(), hashes.SHA256())
            return signature
        if alg == "ES256":
            r, s = decode_dss_signature(ec_key.sign(data, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
        if alg == "EdDSA":
            return ed_key.sign(data)
        raise ValueError(f"the docs fixture does not sign {alg}")

    def mint(alg: str = "RS256", kid: str | None = kid, **claims: Any) -> str:
        header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
        if kid is not None:
            header["kid"] = kid
        payload = {**canonical_payload(now), "iss": ISSUER, "aud": AUDIENCE, **claims}
        payload = {name: value for name, value in payload.items() if value is not None}
        return demo_mint(header, payload, lambda data: sign(alg, data))

    numbers = rsa_key.public_key().public_numbers()
    jwks = {
        "keys": [
            {
                "kty": "RSA",
                "kid": "k1",
                "use": "sig",
                "alg": "RS256",
                "n": _int_b64(numbers.n),
                "e": _int_b64(numbers.e),
            }
        ]
    }

    import msgspec  # noqa: PLC0415
    import pydantic  # noqa: PLC0415

    class MyModel(pydantic.BaseModel):
        sub: str
        email: str

    class MyStruct(msgspec.Struct):
        sub: str
        email: str

    return {
        "__name__": "__main__",
        "now": now,
        "secret": secret,
        "public_pem": pem(rsa_key),
        "rsa_public_pem": pem(rsa_key),
        "next_rsa_public_pem": pem(next_rsa_key),
        "ec_public_pem": pem(ec_key),
        "ed25519_public_pem": pem(ed_key),
        "jwks": jwks,
        "token": mint(),
        "hs_token": mint("HS256", kid="k1"),
        "expired_token": mint(iat=now - 7200, nbf=now - 7200, exp=now - 3600),
        "mint": mint,
        "MyModel": MyModel,
        "MyStruct": MyStruct,
    }


def run_block(block: Block, namespace: dict[str, Any]) -> None:
    """Run one block in ``namespace``; top-level ``await`` runs on a fresh loop."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    # dont_inherit: a page runs as a module of its own, without this file's
    # `from __future__ import annotations` (FastAPI resolves its annotations).
    code = compile(block.code, f"{block.page}:{block.line}", "exec", flags=flags, dont_inherit=True)
    if code.co_flags & inspect.CO_COROUTINE:

        async def main() -> None:
            await eval(code, namespace)  # the documentation's own examples

        asyncio.run(main())
    else:
        exec(code, namespace)  # the documentation's own examples


def main(argv: list[str]) -> int:
    """Run every block of one page; print the failing block and its traceback."""
    path = Path(argv[1]).resolve()
    page = relative(path)
    namespace = fixture(page)
    ran = skipped = files = 0
    for block in extract(path):
        if block.skip_reason is not None:
            skipped += 1
            continue
        if block.file is not None:
            mismatch = file_mismatch(block)
            if mismatch is not None:
                print(f"FAILED: {mismatch}", file=sys.stderr)
                return 1
            files += 1
            continue
        try:
            run_block(block, namespace)
        except BaseException:
            print(f"FAILED: {page}, block at line {block.line}:\n{block.code}", file=sys.stderr)
            traceback.print_exc()
            return 1
        ran += 1
    print(f"{page}: {ran} blocks ran, {files} are example files, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
