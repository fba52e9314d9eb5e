"""The channel between a profiled Ray driver and its workers' peakline sessions: one TCP
connection per worker process, carrying length-prefixed JSON messages (docs/distributed.md,
"Ray"). Shared by the driver's collector (_ray_collector.py) and the workers' agents
(_ray_agent.py); standard library only, so that a worker can report that it cannot import
the rest of peakline.

Messages, worker to driver: ``hello`` (who the worker is, with the token the driver gave it
through the job's runtime_env), ``busy`` (work began after its latest profile), ``profile``
(the profile so far, ``final`` when the session has stopped; with the task functions seen and
the actor's class), ``error`` (the worker could not be profiled: why). Driver to worker: ``final``
(stop the session and hand in the profile).
"""

from __future__ import annotations

import json
import os
import socket
import struct

COLLECTOR_ENV = "PEAKLINE_RAY_COLLECTOR"   # host:port of the driver's collector
TOKEN_ENV = "PEAKLINE_RAY_TOKEN"           # proves a connection comes from this job's workers
OPTIONS_ENV = "PEAKLINE_RAY_OPTIONS"       # the driver's session options (JSON)
USER_HOOK_ENV = "PEAKLINE_RAY_USER_HOOK"   # the program's own worker_process_setup_hook
_HEADER = struct.Struct(">I")
MAX_MESSAGE = 1 << 30


def send(sock: socket.socket, message: dict) -> None:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    sock.sendall(_HEADER.pack(len(data)) + data)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> dict | None:
    """The next message, or None once the other side closed the connection."""
    header = _read_exactly(sock, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    data = _read_exactly(sock, size)
    return None if data is None else json.loads(data.decode("utf-8"))


def connect(timeout_s: float = 30.0) -> socket.socket:
    """A connection to the collector named in this worker's environment."""
    host, _, port = os.environ[COLLECTOR_ENV].rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    sock.settimeout(None)
    return sock


def who() -> dict:
    """This worker, as the driver names it: pid and host (and Ray's ids when known)."""
    return {"pid": os.getpid(), "hostname": socket.gethostname()}
