"""Real servers the tests start themselves on 127.0.0.1: nginx and Redis.

Both come from Debian packages installed by ``bash scripts/prereqs.sh
servers``; a test that needs one fails naming that step when it is missing
(never skips). Each server runs in the foreground as a child of the test
process, on a free port, with its files in a temporary directory, and is
stopped (and waited for) when the test leaves the ``with`` block.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Nginx", "RedisServer", "binary", "free_port", "wait_listening"]

#: Where Debian puts daemons (not on every user's PATH).
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
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


class RedisServer:
    """``redis-server`` on 127.0.0.1 and a free port, no persistence.

    :meth:`stop` ends it (the tests that show the store failing closed stop
    it mid-run); :meth:`start` starts it again on the same port.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        command = [
            binary("redis-server"),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.folder),
            "--loglevel", "warning",
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_listening(self.port, self.process, "redis-server")
        return self

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
