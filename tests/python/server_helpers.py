"""Helpers for the validation server tests (test_server_*.py): synthetic profiles whose
figures are chosen by the test, a `peakline serve` subprocess that is always reaped, and a
small HTTP client (urllib).

The synthetic profile is one script ``model.py`` with two lines: line 1 holds the whole heap
at the peak; its heap timeline is chosen by the caller (default: a ramp to the peak).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from peakline.model.profile import Profile

MiB = 1 << 20
SOURCE = "big = bytearray(N)  # the model's weights\nanswer = sum(big[:10])\n"


def profile_dict(*, peak: int = 100 * MiB, rss: int | None = None, cpu_s: float = 0.5,
                 wall_s: float = 1.0, timeline: list | None = None,
                 program: str = "model.py", filename: str = "/srv/app/model.py",
                 exit_code: int | None = 0, gpu_peak: int | None = None) -> dict[str, Any]:
    rss = peak + 20 * MiB if rss is None else rss
    timeline = timeline if timeline is not None else [[0.0, 0], [wall_s / 2, peak],
                                                      [wall_s, peak]]
    line = dict(cpu_python_s=cpu_s, cpu_native_s=0.0, cpu_system_s=0.0, wait_s=0.0,
                samples=max(1, int(cpu_s / 0.01)), alloc_python_bytes=peak,
                alloc_native_bytes=0, free_bytes=0, net_bytes=peak, live_at_peak_bytes=peak,
                timeline=[[wall_s / 2, peak]], leak_likelihood=0.0, leak_rate_bytes_s=0.0,
                copy_bytes=0, copy_mb_s=0.0)
    second = dict(line, lineno=2, cpu_python_s=0.0, samples=0, alloc_python_bytes=0,
                  net_bytes=0, live_at_peak_bytes=0, timeline=[])
    out = {
        "format": "peakline", "version": 1, "program": program, "argv": [program],
        "python_version": "3.11.7", "platform": "Linux-x86_64", "pid": 1000,
        "started_at": "2026-12-01T10:00:00.000000Z", "elapsed_s": wall_s,
        "exit_code": exit_code,
        "options": {"cpu_sampling_interval_s": 0.01, "profile_all": False, "profile_only": [],
                    "profile_exclude": []},
        "sampling": {"cpu_samples": line["samples"], "wait_samples": 0, "dropped_samples": 0,
                     "invalid_frames": 0, "truncated_stacks": 0},
        "totals": {"cpu_python_s": cpu_s, "cpu_native_s": 0.0, "cpu_system_s": 0.0,
                   "wait_s": 0.0, "unattributed_s": 0.0},
        "threads": [{"tid": 1000, "name": "MainThread", "python": True, "cpu_s": cpu_s,
                     "wait_s": 0.0}],
        "files": {filename: {
            "lines": [dict(line, lineno=1), second],
            "functions": [{"name": "<module>", "lineno": 1, "cpu_python_s": cpu_s,
                           "cpu_native_s": 0.0, "cpu_system_s": 0.0, "wait_s": 0.0,
                           "self_s": cpu_s, "inclusive_s": cpu_s, "samples": line["samples"],
                           "alloc_python_bytes": peak, "alloc_native_bytes": 0,
                           "free_bytes": 0, "net_bytes": peak, "live_at_peak_bytes": peak,
                           "copy_bytes": 0}]}},
        "stacks": {"frames": [[filename, "<module>", 1, 2]],
                   "samples": [{"thread": 1000, "frames": [0], "cpu_python_s": cpu_s,
                                "cpu_native_s": 0.0, "cpu_system_s": 0.0, "wait_s": 0.0,
                                "cpu_samples": line["samples"], "wait_samples": 0}]},
        "peak_bytes": peak, "peak_rss_bytes": rss, "timeline": timeline,
        "memory": {"sampling_interval_bytes": 524288, "copy_sampling_interval_bytes": 2097152,
                   "peak_time_s": wall_s / 2, "live_end_bytes": peak,
                   "growth_rate_bytes_s": 0.0, "alloc_samples": 1, "free_samples": 0,
                   "copy_samples": 0, "not_sampled_events": 0, "unattributed_alloc_bytes": 0,
                   "staged_events": 0},
    }
    if gpu_peak is not None:
        out["gpu"] = {"device_name": "Test GPU", "devices": ["Test GPU"], "peak_bytes": gpu_peak,
                      "util_mean_pct": None, "util_s": None, "memory_source": "process",
                      "alloc_source": None, "poll_interval_s": 0.05, "readings": 10,
                      "unavailable": []}
    Profile.from_dict(out)  # a helper that made an invalid profile would hide real failures
    return out


def envelope(model: str, version: str, profile: dict, *, upload_id: str | None = None,
             sources: dict | None = None) -> dict[str, Any]:
    return {"upload_id": upload_id or uuid.uuid4().hex, "model": model, "version": version,
            "metadata": {"git_commit": "0123456789abcdef", "machine": "test"},
            "sources": {"/srv/app/model.py": SOURCE} if sources is None else sources,
            "profile": profile}


def request(url: str, *, method: str = "GET", body: Any = None, token: str | None = None,
            raw: bytes | None = None, headers: dict | None = None, timeout: float = 60.0
            ) -> tuple[int, Any]:
    """(status, decoded JSON or text) of one request; never raises for an HTTP status."""
    data = raw if raw is not None else (None if body is None else
                                        json.dumps(body).encode("utf-8"))
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            status, payload, kind = response.status, response.read(), \
                response.headers.get("content-type", "")
    except urllib.error.HTTPError as error:
        status, payload, kind = error.code, error.read(), error.headers.get("content-type", "")
    return status, (json.loads(payload) if "json" in kind else payload.decode("utf-8"))


def push(base: str, token: str, model: str, version: str, profile: dict, **kwargs
         ) -> tuple[int, Any]:
    body = gzip.compress(json.dumps(envelope(model, version, profile, **kwargs)).encode())
    return request(base + "/api/runs", method="POST", raw=body, token=token,
                   headers={"Content-Encoding": "gzip"})


def peakline(*args: str, env: dict | None = None, timeout: float = 120.0
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "peakline", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def create_token(name: str, *db_args: str) -> str:
    done = peakline("serve", "token", "create", name, *db_args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Server:
    """`peakline serve --port 0 ...` in a subprocess; ``base`` is its URL once started."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.base = ""

    def start(self, timeout: float = 60.0) -> "Server":
        self.proc = subprocess.Popen([sys.executable, "-m", "peakline", "serve", "--port", "0",
                                      *self.args], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                self.base = found.group(1)
                break
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"peakline serve exited with {self.proc.returncode}")
        else:
            self.kill()
            raise RuntimeError(f"peakline serve did not start: {line!r}")
        # keep reading stderr so the server never blocks on a full pipe
        import threading
        self.log: list[str] = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


class InProcessServer:
    """The server app on a thread of this process (uvicorn on a socket bound to a free
    port): for tests that need no separate process, without paying for one's start-up."""

    def __init__(self, url: str, **settings: Any) -> None:
        from peakline.server.app import create_app
        from peakline.server.database import open_engine

        self.engine = open_engine(url)
        self.app = create_app(self.engine, **settings)
        self.base = ""

    def __enter__(self) -> "InProcessServer":
        import socket
        import threading

        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
        self.server.install_signal_handlers = lambda: None  # not the main thread
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
        self.engine.dispose()
