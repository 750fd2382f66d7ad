"""FastAPI through a real server: the cost of guarding an endpoint, side by side.

One uvicorn process (one worker, 127.0.0.1) serves the same endpoint five ways:

- ``/none``     no auth at all (the reference);
- ``/noop``     a dependency that does nothing: what FastAPI charges for one;
- ``/cached``   ``Security(JWTBearer(verifier), scopes=["read:items"])``, cache on
                (every request after the first is a cache hit);
- ``/uncached`` the same with ``cache_size=0`` (a full verification per request);
- ``/pyjwt``    the dependency users write by hand today: ``HTTPBearer`` plus
                ``jwt.decode`` (PyJWT) with the same policy and a scope check.

Load comes from a second process: ``wrk`` when installed (``apt-get install
wrk``), else an asyncio HTTP/1.1 keep-alive loop in a separate process. Lanes
are interleaved round by round; the median per lane is reported with its
ratio to ``/none``, and so is the server's own CPU time per request (all its
threads, from ``/proc/<pid>/task/*/schedstat``): requests/s follows whatever
CPU share a shared machine leaves the server, CPU per request hardly does, so
its ratio is the capacity ratio to read. The stack ``auto`` is httptools and
uvloop when installed (``uvicorn[standard]``), else h11 and asyncio. The
token is the canonical RS256 one of ``shared/bench-token.md`` (RSA-2048,
typical payload). Before timing, every
guarded lane is checked: 200 with the token, 401 for an expired, a
wrong-audience and a tampered token, 403 for a token without the scope.

    .venv/bin/python bench/fastapi_bench.py                 # prints the table
    .venv/bin/python bench/fastapi_bench.py --write         # and updates docs/benchmarks.md
    .venv/bin/python bench/fastapi_bench.py --stack h11/asyncio --stack httptools/uvloop
    .venv/bin/python bench/fastapi_bench.py --rounds 1 --seconds 2   # quick look
"""

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import httpx
import jwt
import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fixtures import encode, forge, typical_payload
from starlette.requests import HTTPConnection

from grelmicro.jwt import Claims, JWTVerifier, Key
from grelmicro.jwt._demo import AUDIENCE, ISSUER
from grelmicro.jwt.fastapi import JWTBearer

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
MARK_BEGIN = "<!-- fastapi-bench:begin -->"
MARK_END = "<!-- fastapi-bench:end -->"
LANES = {
    "/none": "no auth (reference)",
    "/noop": "a no-op dependency (FastAPI's own cost of one)",
    "/cached": "grelmicro JWTBearer, cache hits",
    "/uncached": "grelmicro JWTBearer, cache off",
    "/pyjwt": "PyJWT 2 + HTTPBearer, hand-written",
}


# -- keys and tokens -------------------------------------------------------------


def make_keys() -> tuple[Any, bytes]:
    private = forge.generate("RS256")
    return private, forge.spki_pem(private)


def sign(private: Any, payload: dict[str, Any]) -> str:
    return encode("RS256", private, payload)


def canonical(now: int, **changes: Any) -> dict[str, Any]:
    return {**typical_payload(now), **changes}


# -- the server process ------------------------------------------------------------


def build_app(public_pem: bytes) -> Any:
    policy = {"audience": AUDIENCE, "issuer": ISSUER}
    cached = JWTBearer(JWTVerifier([Key.pem(public_pem, "RS256", kid="k1")], **policy))
    uncached = JWTBearer(
        JWTVerifier([Key.pem(public_pem, "RS256", kid="k1")], cache_size=0, **policy),
        scheme_name="JWTBearerNoCache",
    )
    bearer = HTTPBearer()
    pyjwt_key = jwt.algorithms.RSAAlgorithm(jwt.algorithms.RSAAlgorithm.SHA256).prepare_key(
        public_pem
    )

    def pyjwt_claims(
        credentials: Annotated[HTTPAuthorizationCredentials, Depends(bearer)],
    ) -> dict[str, Any]:
        # What the FastAPI docs lead users to write: decode, catch, 401; then scopes.
        try:
            claims: dict[str, Any] = jwt.decode(
                credentials.credentials,
                pyjwt_key,
                algorithms=["RS256"],
                audience=AUDIENCE,
                issuer=ISSUER,
            )
        except jwt.PyJWTError:
            raise HTTPException(401, "invalid token", {"WWW-Authenticate": "Bearer"}) from None
        if "read:items" not in str(claims.get("scope", "")).split():
            raise HTTPException(403, "insufficient scope", {"WWW-Authenticate": "Bearer"})
        return claims

    app = FastAPI()
    cached.install(app)

    @app.get("/none")
    async def none() -> dict[str, str]:
        return {"sub": "user-1234567890"}

    async def noop(connection: HTTPConnection) -> None:
        return None

    @app.get("/noop")
    async def with_noop(nothing: Annotated[None, Depends(noop)]) -> dict[str, str]:
        return {"sub": "user-1234567890"}

    @app.get("/cached")
    async def with_cache(
        claims: Annotated[Claims, Security(cached, scopes=["read:items"])],
    ) -> dict[str, str]:
        return {"sub": claims["sub"]}

    @app.get("/uncached")
    async def without_cache(
        claims: Annotated[Claims, Security(uncached, scopes=["read:items"])],
    ) -> dict[str, str]:
        return {"sub": claims["sub"]}

    @app.get("/pyjwt")
    async def with_pyjwt(
        claims: Annotated[dict[str, Any], Depends(pyjwt_claims)],
    ) -> dict[str, str]:
        return {"sub": claims["sub"]}

    return app


def serve(public_pem_path: str, http: str, loop: str) -> None:
    """Server process: bind 127.0.0.1:0, print the port, serve until terminated."""
    app = build_app(Path(public_pem_path).read_bytes())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    # Accepted connections inherit TCP_NODELAY from the listener; without it
    # every response waits ~40 ms on Nagle + delayed ACK (uvicorn sets it only
    # on sockets it creates itself).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(listener.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, http=http, loop=loop)  # type: ignore[arg-type]
    uvicorn.Server(config).run(sockets=[listener])


# -- the load process (fallback when wrk is absent) ----------------------------------


async def _load(
    port: int, path: str, token: str, seconds: float, connections: int
) -> dict[str, Any]:
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                match = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
                await reader.readexactly(int(match.group(1)) if match else 0)
                latencies.append(time.perf_counter() - start)
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else float("nan"),
    }


def load_process(
    port: int, path: str, token: str, seconds: float, connections: int
) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--load",
            str(port),
            path,
            token,
            str(seconds),
            str(connections),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def wrk(port: int, path: str, token: str, seconds: float, connections: int) -> dict[str, Any]:
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-H",
            f"Authorization: Bearer {token}",
            f"http://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    if re.search(r"Non-2xx or 3xx responses", out):
        raise RuntimeError(f"{path}: errors under load\n{out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return {"rps": rps, "p99_ms": float(value) * scale, "requests": requests}


def server_cpu_ns(pid: int) -> int:
    """CPU time the server process has used, all threads, in ns (Linux schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


# -- the driver --------------------------------------------------------------------


def check(port: int, tokens: dict[str, str]) -> None:
    expected = {"valid": 200, "expired": 401, "audience": 401, "tampered": 401, "noscope": 403}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        for path in ("/cached", "/uncached", "/pyjwt"):
            for name, status in expected.items():
                got = client.get(path, headers={"Authorization": f"Bearer {tokens[name]}"})
                if got.status_code != status:
                    raise SystemExit(f"lane {path} fails its check: {name} -> {got.status_code}")
        for path in ("/none", "/noop"):
            if client.get(path).status_code != 200:
                raise SystemExit(f"{path} does not answer")


def conditions(load_tool: str, http: str, loop: str) -> dict[str, str]:
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(
        f"{name} {metadata.version(name)}"
        for name in (
            "fastapi",
            "starlette",
            "uvicorn",
            "httptools",
            "uvloop",
            "pyjwt",
            "cryptography",
        )
        if _installed(name)
    )
    return {
        "interpreter": f"{platform.python_implementation()} {platform.python_version()}",
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "load": load,
        "tool": load_tool,
        "server": (
            f"uvicorn, 1 worker, http={_resolved('http', http)}, loop={_resolved('loop', loop)}"
        ),
        "versions": versions,
    }


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _resolved(what: str, choice: str) -> str:
    """What uvicorn's ``auto`` picks: httptools / uvloop when installed."""
    if choice != "auto":
        return choice
    if what == "http":
        return "httptools" if _installed("httptools") else "h11"
    return "uvloop" if _installed("uvloop") else "asyncio"


def table(results: dict[str, list[dict[str, Any]]], info: dict[str, str], args: Any) -> str:
    """Per lane: server CPU per request, requests/s (median and best round), p99.

    On a shared machine, requests/s follows whatever CPU share the server
    got; the server's own CPU time per request (all its threads, from
    ``/proc/<pid>/task/*/schedstat``) barely moves with load, so its ratio
    is the capacity ratio to read.
    """

    def med(path: str, key: str) -> float:
        return statistics.median(r[key] for r in results[path])

    base_cpu = med("/none", "cpu_us")
    base = med("/none", "rps")
    base_best = max(r["rps"] for r in results["/none"])
    lines = [
        f"**{info['server']}**",
        "",
        "| lane | server CPU per request | capacity vs no auth | requests/s, median (ratio)"
        " | requests/s, best round (ratio) | p99, median |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for path, label in LANES.items():
        cpu = med(path, "cpu_us")
        rps = med(path, "rps")
        best = max(r["rps"] for r in results[path])
        lines.append(
            f"| {label} (`{path}`) | {cpu:,.0f} µs | {base_cpu / cpu:.2f} | "
            f"{rps:,.0f} ({rps / base:.2f}) | {best:,.0f} ({best / base_best:.2f}) | "
            f"{med(path, 'p99_ms'):.2f} ms |"
        )
    lines.append("")
    lines.append(
        f"{info['interpreter']}; {info['cpu']}; load average before the run {info['load']}; "
        f"load from a second process: {info['tool']}, "
        f"{args.connections} connections, {args.rounds} rounds x {args.seconds:g} s per lane, "
        f"lanes interleaved, medians over rounds; {info['versions']}."
    )
    return "\n".join(lines)


READING = """\
The same endpoint served five ways by one uvicorn worker on 127.0.0.1, load
from `wrk` in a second process (`bench/fastapi_bench.py`). *Server CPU per
request* is the server process's own CPU time (all threads) divided by the
requests it answered; its ratio to the no-auth lane is the capacity ratio and
holds on a shared machine, where requests/s follows the CPU share the server
got. The no-op dependency lane is what FastAPI charges for any dependency:
the guarded lanes cannot beat it. The target is guarded with cache hits at
80% or more of no auth."""


def write_page(section: str) -> None:
    text = PAGE.read_text() if PAGE.exists() else ""
    block = f"{MARK_BEGIN}\n## FastAPI through uvicorn\n\n{READING}\n\n{section}\n\n" + (
        "Reproduce: `.venv/bin/python bench/fastapi_bench.py --write` (after `scripts/setup.sh`; "
        "`apt-get install wrk` for the load generator).\n"
        f"{MARK_END}"
    )
    if MARK_BEGIN in text and MARK_END in text:
        head, rest = text.split(MARK_BEGIN, 1)
        text = head + block + rest.split(MARK_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    PAGE.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--http", default="auto", help="uvicorn --http (auto, h11, httptools)")
    parser.add_argument("--loop", default="auto", help="uvicorn --loop (auto, asyncio, uvloop)")
    parser.add_argument(
        "--stack",
        action="append",
        help="HTTP/LOOP to measure, e.g. h11/asyncio or httptools/uvloop (repeatable)",
    )
    parser.add_argument("--no-wrk", action="store_true", help="use the asyncio load process")
    parser.add_argument("--write", action="store_true", help=f"update the section of {PAGE}")
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return 0
    if args.load:
        port, path, token, seconds, connections = args.load
        result = asyncio.run(_load(int(port), path, token, float(seconds), int(connections)))
        print(json.dumps(result))
        return 0

    use_wrk = shutil.which("wrk") is not None and not args.no_wrk
    tool = "wrk 4 (1 thread)" if use_wrk else "asyncio keep-alive loop (Python)"
    now = int(time.time())
    private, public_pem = make_keys()
    other, _ = make_keys()
    tokens = {
        "valid": sign(private, canonical(now)),
        "expired": sign(private, canonical(now, exp=now - 60, iat=now - 120, nbf=now - 120)),
        "audience": sign(private, canonical(now, aud="https://other.example")),
        "tampered": sign(other, canonical(now)),
        "noscope": sign(private, canonical(now, scope="profile")),
    }
    pem_path = ROOT / "bench" / ".work" / "fastapi-bench.pem"
    pem_path.parent.mkdir(parents=True, exist_ok=True)
    pem_path.write_bytes(public_pem)
    sections = []
    for stack in args.stack or [f"{args.http}/{args.loop}"]:
        http, _, loop = stack.partition("/")
        info = conditions(tool, http, loop or "auto")
        results = measure(args, pem_path, http, loop or "auto", tokens, use_wrk)
        sections.append(table(results, info, args))
        print(sections[-1] + "\n", flush=True)
    if args.write:
        write_page("\n\n".join(sections))
        print(f"written to {PAGE.relative_to(ROOT)}")
    return 0


def measure(
    args: Any, pem_path: Path, http: str, loop: str, tokens: dict[str, str], use_wrk: bool
) -> dict[str, list[dict[str, Any]]]:
    """Start one server with this stack, check every lane, time them interleaved."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(pem_path), http, loop],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        check(port, tokens)
        run = wrk if use_wrk else load_process
        results: dict[str, list[dict[str, Any]]] = {path: [] for path in LANES}
        for path in LANES:  # warm-up (fills the cache for /cached)
            run(port, path, tokens["valid"], 1.0, args.connections)
        for round_ in range(args.rounds):
            for path in LANES:
                before = server_cpu_ns(server.pid)
                result = run(port, path, tokens["valid"], args.seconds, args.connections)
                used = server_cpu_ns(server.pid) - before
                result["cpu_us"] = used / 1000 / max(result["requests"], 1)
                results[path].append(result)
            print(f"{http}/{loop}: round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(10)
    return results


if __name__ == "__main__":
    sys.exit(main())
