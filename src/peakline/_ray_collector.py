"""The driver side of Ray profiling: a TCP listener in the profiled driver that the job's
workers connect to (_ray_agent.py) and hand their profiles in through (_ray_wire.py).

One thread of peakline's own serves every connection (``selectors``), never measured. For
each worker it keeps the latest profile it handed in. ``finish()``, when the driver's profile
is built, asks every worker still connected for its final profile and waits for them (the
cluster still runs when the program did not shut it down), then returns the workers'
profiles for merging and a record for each worker that left none: one whose connection
closed before it handed in anything (it died, or the driver shut Ray down first), or that
could not be profiled (``error``: peakline not importable there).
"""

from __future__ import annotations

import os
import secrets
import selectors
import socket
import threading
import time

from peakline import _ray_wire as wire

FINAL_TIMEOUT_S = 60.0


class _Worker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.info: dict | None = None   # the hello, once it came with the right token
        self.profile: dict | None = None
        self.final = False
        self.received_at = 0.0          # time.monotonic() of the latest profile
        self.tasks: list[str] = []
        self.actor: str | None = None
        self.error: str | None = None
        self.closed = False
        self.busy_after_profile = False  # it began work after its latest profile

    def name(self) -> str:
        info = self.info or {}
        return f"pid {info.get('pid', '?')} on {info.get('hostname', '?')}"


class Collector:
    def __init__(self, host: str = "0.0.0.0", advertise: str | None = None) -> None:
        self.token = secrets.token_hex(16)
        self.listener = socket.create_server((host, 0))
        self.listener.setblocking(False)
        port = self.listener.getsockname()[1]
        self.address = f"{advertise or _reachable_address()}:{port}"
        self.workers: list[_Worker] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.stopping = False
        self.stopped_at: float | None = None
        from peakline.snapshots import start_own_thread

        start_own_thread(self._serve)

    def _serve(self) -> None:
        from peakline.session import exclude_current_thread, own_thread_ending

        try:
            exclude_current_thread()
        except Exception:  # noqa: BLE001 - no core: measured then, still served
            pass
        try:
            while not self.stopping:
                for key, _ in self.selector.select(timeout=0.2):
                    if key.data is None:
                        self._accept()
                    else:
                        self._read(key.data)
        finally:
            own_thread_ending()

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(True)
        worker = _Worker(sock)
        self.selector.register(sock, selectors.EVENT_READ, worker)

    def _read(self, worker: _Worker) -> None:
        try:
            message = wire.receive(worker.sock)
        except (OSError, ValueError):
            message = None
        with self.changed:
            if message is None:
                self._close(worker)
            elif worker.info is None:
                if message.get("type") == "hello" and message.get("token") == self.token:
                    worker.info = message
                    self.workers.append(worker)
                else:
                    self._close(worker)  # not one of this job's workers
            elif message.get("type") == "busy":
                worker.busy_after_profile = True
            elif message.get("type") == "profile":
                worker.busy_after_profile = False
                worker.profile = message.get("profile")
                worker.final = bool(message.get("final"))
                worker.tasks = list(message.get("tasks") or [])
                worker.actor = message.get("actor")
                worker.received_at = time.monotonic()
            elif message.get("type") == "error":
                worker.error = str(message.get("message"))
            self.changed.notify_all()

    def _close(self, worker: _Worker) -> None:
        worker.closed = True
        try:
            self.selector.unregister(worker.sock)
        except (KeyError, ValueError):
            pass
        try:
            worker.sock.close()
        except OSError:
            pass

    def finish(self, timeout_s: float = FINAL_TIMEOUT_S) -> tuple[list, list[dict]]:
        """(the workers' Profiles, records of the workers that left none); see the module doc."""
        from peakline.model.profile import Profile

        with self.changed:
            waiting = [w for w in self.workers if not w.closed and not w.final
                       and w.error is None]
            for worker in waiting:
                try:
                    wire.send(worker.sock, {"type": "final"})
                except OSError:
                    pass
            deadline = time.monotonic() + timeout_s
            while any(not w.closed and not w.final for w in waiting):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(min(left, 0.5))
            self.stopping = True
            finished_at = time.monotonic()
            workers = list(self.workers)
        profiles, missing = [], []
        for worker in workers:
            info = worker.info or {}
            record = {"pid": int(info.get("pid") or 0), "program": f"ray worker {worker.name()}",
                      "argv": [], "hostname": info.get("hostname")}
            if worker.error is not None:
                missing.append({**record, "not_merged_reason":
                                f"Ray worker {worker.name()} was not profiled: {worker.error}"})
                continue
            if worker.profile is None:
                missing.append({**record, "not_merged_reason":
                                f"Ray worker {worker.name()} ended before it handed in a "
                                "profile (Ray kills its workers at shutdown and a worker that "
                                "dies mid-task writes nothing): its work is not in this profile"})
                continue
            doc = extra = worker.profile  # undeclared fields are the profile's top-level keys
            extra["ray_worker_id"] = info.get("ray_worker_id")
            extra["ray_actor"] = worker.actor
            extra["ray_tasks"] = worker.tasks
            if not worker.final and (worker.busy_after_profile or not worker.closed):
                # Gone (or silent) while it worked: what it did after its latest profile is
                # lost. A worker that went idle, handed its profile in and was then ended by
                # Ray (idle workers are, and all at shutdown) lost nothing.
                extra["partial_reason"] = (
                    "the worker ended (or did not answer) during its work, before it could "
                    "hand in its final profile: this is its profile so far, handed in "
                    f"{max(0.0, finished_at - worker.received_at):.1f} s before the driver "
                    "finished; what it did after that is missing")
            profiles.append(Profile.from_dict(doc, source=f"Ray worker {worker.name()}"))
        self.close()
        profiles.sort(key=lambda p: (p.started_at, p.pid))
        return profiles, missing

    def close(self) -> None:
        self.stopping = True
        for worker in list(self.workers):
            self._close(worker)
        try:
            self.selector.unregister(self.listener)
        except (KeyError, ValueError):
            pass
        self.listener.close()


def _reachable_address() -> str:
    """This host's address as other nodes reach it: ``PEAKLINE_RAY_DRIVER_ADDRESS`` when set,
    else the source address of a route outwards (no packet is sent), else loopback."""
    given = os.environ.get("PEAKLINE_RAY_DRIVER_ADDRESS")
    if given:
        return given
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
