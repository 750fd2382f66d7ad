"""Real servers the tests start themselves on 127.0.0.1: nginx, Redis, Valkey, gunicorn.

nginx and Redis come from Debian packages installed by ``bash
scripts/prereqs.sh servers``; Valkey (packaged from Debian trixie on) from
the same step, through ``scripts/get-valkey.sh`` into ``/opt/valkey``. A
test that needs one fails naming that step when it is missing (never
skips). Redis also runs as a three-node cluster (:class:`RedisCluster`) and
as a master, a replica and a Sentinel (:class:`RedisSentinel`). Each
server runs in the foreground as a child of the test process, on a free
port, with its files in a temporary directory, and is stopped (and waited
for) when the test leaves the ``with`` block.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

__all__ = [
    "Nginx",
    "RedisCluster",
    "RedisSentinel",
    "RedisServer",
    "binary",
    "free_port",
    "gunicorn_preload",
    "serving",
    "wait_for",
    "wait_listening",
]

#: Where Debian puts daemons (not on every user's PATH); scripts/get-valkey.sh's prefix.
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin", "/opt/valkey/bin")
#: The longest a server may take to start or stop before the test fails (a hang).
START_GUARD = 20.0


def binary(name: str) -> str:
    """The path of ``name`` (PATH, then the sbin folders); fails naming the prereqs step."""
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *_SBIN]))
    if found is None:
        raise AssertionError(f"{name} is missing: run `bash scripts/prereqs.sh servers` (once)")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` just now (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def cluster_port(host: str = "127.0.0.1") -> int:
    """A port for a cluster node: at most 55535, its bus port (+10000) free too.

    Redis refuses a cluster port above 55535 (its bus listens 10000 higher),
    and the kernel's free ports mostly lie above it: look below instead.
    """
    for _ in range(200):
        port = free_port(host) % 30000 + 20000  # 20000..49999: below the ephemeral range
        if _is_free(port, host) and _is_free(port + 10000, host):
            return port
    raise AssertionError("no free port pair for a cluster node")


def wait_listening(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    """Wait until ``port`` on 127.0.0.1 accepts connections (or ``process`` died)."""
    deadline = time.monotonic() + START_GUARD
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited at start: {_output(process)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)  # polling a port: the server has no readiness event to wait on
    raise AssertionError(f"{what} did not listen on {port} in {START_GUARD} s")


def _output(process: subprocess.Popen[bytes]) -> str:
    if process.stdout is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        return process.stdout.read().decode(errors="replace")[-2000:]
    return ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(START_GUARD)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(START_GUARD)
    if process.stdout is not None:
        process.stdout.close()


def wait_for(condition: Callable[[], bool], what: str, guard: float = START_GUARD) -> None:
    """Poll ``condition`` until it holds (a server state with no event to wait on)."""
    deadline = time.monotonic() + guard
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {guard} s")
        time.sleep(0.05)


class RedisServer:
    """``redis-server`` (or ``valkey-server``) on 127.0.0.1 and a free port, no persistence.

    :meth:`stop` ends it (the tests that show the store failing closed stop
    it mid-run); :meth:`start` starts it again on the same port. ``extra``
    adds command-line options (``--cluster-enabled yes``, ``--replicaof``).
    """

    def __init__(
        self,
        folder: Path,
        *,
        server: str = "redis-server",
        extra: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        self.folder = folder
        self.server = server
        self.extra = tuple(extra)
        self.port = free_port() if port is None else port
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [
            binary(self.server),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.folder),
            "--loglevel", "warning",
            *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_listening(self.port, self.process, self.server)
        return self

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisCluster:
    """A Redis Cluster of three masters on 127.0.0.1 (no replicas), made with redis-cli.

    Each node is a :class:`RedisServer` with ``--cluster-enabled yes``;
    ``redis-cli --cluster create`` shares the 16384 slots among them.
    ``nodes`` are the servers; ``port`` is the first node's.
    """

    def __init__(self, folder: Path, size: int = 3) -> None:
        options = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "2000",
        ]  # fmt: skip
        self.nodes = [
            RedisServer(folder / f"node{i}", extra=options, port=cluster_port())
            for i in range(size)
        ]
        self.port = self.nodes[0].port

    def __enter__(self) -> RedisCluster:
        try:
            for node in self.nodes:
                node.start()
            addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
            subprocess.run(
                [binary("redis-cli"), "--cluster", "create", *addresses,
                 "--cluster-replicas", "0", "--cluster-yes"],
                check=True, capture_output=True, timeout=START_GUARD,
            )  # fmt: skip
            wait_for(self._ready, "the cluster's slots agreed on every node")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _ready(self) -> bool:
        for node in self.nodes:
            info = subprocess.run(
                [binary("redis-cli"), "-p", str(node.port), "cluster", "info"],
                capture_output=True, text=True, timeout=START_GUARD, check=False,
            ).stdout  # fmt: skip
            if "cluster_state:ok" not in info:
                return False
        return True

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.stop()


_SENTINEL_CONF = """
port {port}
bind 127.0.0.1
dir {folder}
sentinel resolve-hostnames no
sentinel monitor {name} 127.0.0.1 {master} 1
sentinel down-after-milliseconds {name} 400
sentinel failover-timeout {name} 3000
sentinel parallel-syncs {name} 1
"""


class RedisSentinel:
    """A master, its replica and one Sentinel (quorum 1) on 127.0.0.1.

    The Sentinel is ``redis-server --sentinel`` (Debian's redis-sentinel
    package is the same binary); it declares the master down 0.4 s after
    it stops answering and promotes the replica.
    """

    name = "grelmicro"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.master = RedisServer(folder / "master")
        self.replica = RedisServer(
            folder / "replica", extra=["--replicaof", "127.0.0.1", str(self.master.port)]
        )
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RedisSentinel:
        try:
            self.master.start()
            self.replica.start()
            conf = self.folder / "sentinel.conf"
            conf.write_text(
                _SENTINEL_CONF.format(
                    port=self.port, folder=self.folder, name=self.name, master=self.master.port
                )
            )
            self.process = subprocess.Popen(
                [binary("redis-server"), str(conf), "--sentinel"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            wait_listening(self.port, self.process, "redis-sentinel")
            wait_for(self._knows_the_replica, "the Sentinel found the replica")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _cli(self, *args: str) -> str:
        return subprocess.run(
            [binary("redis-cli"), "-p", str(self.port), *args],
            capture_output=True, text=True, timeout=START_GUARD, check=False,
        ).stdout  # fmt: skip

    def _knows_the_replica(self) -> bool:
        replication = subprocess.run(
            [binary("redis-cli"), "-p", str(self.replica.port), "info", "replication"],
            capture_output=True, text=True, timeout=START_GUARD, check=False,
        ).stdout  # fmt: skip
        if "master_link_status:up" not in replication:
            return False
        return str(self.replica.port) in self._cli("sentinel", "replicas", self.name)

    def master_port(self) -> int:
        """The port the Sentinel names as the master now."""
        return int(self._cli("sentinel", "get-master-addr-by-name", self.name).split()[1])

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            _stop(self.process)
            self.process = None
        self.replica.stop()
        self.master.stop()


_NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {certificate};
        ssl_certificate_key {key};
        ssl_client_certificate {ca};
        ssl_verify_client optional;
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_bind {source};
            proxy_set_header Host $http_host;
{headers}
        }}
    }}
}}
"""


class Nginx:
    """nginx terminating TLS on 127.0.0.1 (client certificates optional) before an app.

    It forwards to ``upstream`` from the loopback address ``source`` (so the
    app sees the proxy at an address no test client uses) and sets
    ``headers`` (``{"X-Client-Cert": "$ssl_client_escaped_cert"}``), which
    replaces any copy a client sent.
    """

    def __init__(
        self,
        folder: Path,
        *,
        upstream: int,
        certificate: Path,
        key: Path,
        ca: Path,
        headers: dict[str, str],
        source: str = "127.0.0.2",
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        lines = "\n".join(
            f"            proxy_set_header {name} {value};" for name, value in headers.items()
        )
        self.conf = folder / "nginx.conf"
        self.conf.write_text(
            _NGINX_CONF.format(
                folder=folder,
                port=self.port,
                certificate=certificate,
                key=key,
                ca=ca,
                upstream=upstream,
                source=source,
                headers=lines,
            )
        )
        self.process: subprocess.Popen[bytes] | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[Nginx]:
        self.process = subprocess.Popen(
            [binary("nginx"), "-e", "stderr", "-p", str(self.folder), "-c", str(self.conf)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_listening(self.port, self.process, "nginx")
            yield self
        finally:
            _stop(self.process)


#: The test apps (``tests/jwt/apps``) and the guide's gunicorn settings.
_TESTS = Path(__file__).resolve().parent


@contextlib.contextmanager
def gunicorn_preload(
    module: str,
    jwks_url: str,
    *,
    worker: str,
    workers: int,
    threads: int = 4,
    cwd: str | None = None,
    **env: str,
) -> Iterator[str]:
    """``gunicorn --preload`` serving ``apps.<module>:app`` with the guide's ``post_fork`` hook.

    ``TEST_JWKS_URL`` names the provider to the app; ``env`` adds variables;
    ``cwd`` is where it runs (``python -m`` puts it first on the path).
    Yields the base URL; stops gunicorn (and waits for it) on leaving.
    """
    port = free_port()
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(_TESTS / "jwt"), str(_TESTS), str(_TESTS.parent)]),
        "TEST_JWKS_URL": jwks_url,
        "TEST_APP_MODULE": f"apps.{module}",
        **env,
    }
    command = [
        sys.executable, "-m", "gunicorn", f"apps.{module}:app",
        "--preload", "-k", worker, "-w", str(workers), "--threads", str(threads),
        "-c", str(_TESTS / "jwt" / "apps" / "gunicorn_conf.py"),
        "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "5",
    ]  # fmt: skip
    with serving(command, environ, port, "gunicorn", cwd=cwd) as url:
        yield url


@contextlib.contextmanager
def serving(
    command: list[str], env: dict[str, str], port: int, what: str, *, cwd: str | None = None
) -> Iterator[str]:
    """Run ``command`` (an HTTP server on 127.0.0.1:``port``) until the block ends; its URL.

    Its output goes to a temporary file (a pipe nobody reads would block a
    chatty server once full); a server that fails to start shows its tail.
    """
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(  # a fixed command line, from the tests
            command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd
        )
        try:
            try:
                wait_listening(port, process, what)
            except AssertionError as error:
                log.seek(0)
                tail = log.read()[-2000:].decode(errors="replace")
                raise AssertionError(f"{error}; its output: {tail}") from None
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(30)
