"""The worker side of Ray profiling: runs in every Ray worker process of a profiled job, from
the job's ``worker_process_setup_hook`` (set by peakline.ray.runtime_env_hook).

``setup()`` connects to the driver's collector, starts a thread of peakline's own (never
measured, every signal blocked, as the snapshot writer's) and then a peakline session with the
driver's options. The thread hands the profile in over the connection:

* **final**, when the driver asks (its program has finished while the cluster still runs):
  the session stops and its whole profile goes;
* **so far**, when the worker goes idle after running tasks (its main thread is back in Ray's
  task loop for ``IDLE_SETTLE_S``), and every ``PEAKLINE_RAY_SNAPSHOT_EVERY`` seconds (5 by default) while a task
  runs. Ray ends its workers without running their exit handlers (the raylet kills them when
  the driver disconnects: ``ray.shutdown()``, or a worker that dies mid-task), so the last
  profile so far is what the driver keeps of a worker that cannot hand in a final one; the
  merged profile says so for that worker.

The thread also notes which task functions it sees the main thread run (polled every
``POLL_S``: a task shorter than that may go unnamed; its lines are measured either way) and,
in an actor's process, the actor's class (from the actor's handle).
"""

from __future__ import annotations

import os
import select
import sys
import time

from peakline import _ray_wire as wire

POLL_S = 0.05
# Idle this long after work before the profile so far is handed in: not between two queued
# tasks (a snapshot per short task would cost more than the tasks), well before Ray ends an
# idle worker it has too many of (1 s by default).
IDLE_SETTLE_S = 0.25
DEFAULT_SNAPSHOT_EVERY_S = 5.0
IDLE_FUNCTIONS = {"main_loop"}  # ray/_private/worker.py: the task loop, entered from C++


def _ray_package_dir() -> str:
    import ray

    return os.path.dirname(os.path.abspath(ray.__file__)) + os.sep


class _Agent:
    def __init__(self, sock, session, info: dict) -> None:
        self.sock = sock
        self.session = session
        self.info = info
        self.main_ident = None
        self.tasks: list[str] = []
        self.actor: str | None = None
        self.every_s = _snapshot_every()
        self._ray_dir = _ray_package_dir()
        import sysconfig

        paths = sysconfig.get_paths()
        self._stdlib = os.path.join(paths["stdlib"], "")
        self._packages = tuple(os.path.join(paths[k], "") for k in ("purelib", "platlib"))

    def run(self) -> None:
        from peakline.session import exclude_current_thread, own_thread_ending

        exclude_current_thread()
        try:
            self._loop()
        except OSError:
            pass  # the driver went away: nothing to hand in to
        finally:
            own_thread_ending()
            try:
                self.sock.close()
            except OSError:
                pass

    def _loop(self) -> None:
        import threading

        self.main_ident = threading.main_thread().ident
        last_sent = idle_since = time.monotonic()
        busy_since_sent = False
        while True:
            ready, _, _ = select.select([self.sock], [], [], POLL_S)
            if ready:
                message = wire.receive(self.sock)
                if message is None:
                    return  # the driver closed: it has what it will merge
                if message.get("type") == "final":
                    self._send(final=True)
                    return
                continue
            if not self.session.running:
                return
            busy = self._observe_main_thread()
            now = time.monotonic()
            if busy:
                idle_since = None
                if not busy_since_sent:  # the driver learns that work began after the last
                    wire.send(self.sock, {"type": "busy"})
                busy_since_sent = True
                if now - last_sent >= self.every_s:
                    self._send(final=False)
                    last_sent, busy_since_sent = time.monotonic(), False
                continue
            if idle_since is None:
                idle_since = now
            if busy_since_sent and now - idle_since >= IDLE_SETTLE_S:
                # Idle after work (not just between two queued tasks): hand in what it did.
                self._send(final=False)
                last_sent, busy_since_sent = time.monotonic(), False

    def _observe_main_thread(self) -> bool:
        """Whether the main thread runs a task now (code outside Ray and the standard
        library: Ray's own work between tasks and at exit is not one); notes the task's
        function (the outermost frame in a reported file)."""
        frame = sys._current_frames().get(self.main_ident)
        if frame is None:
            return False
        if frame.f_code.co_name in IDLE_FUNCTIONS and frame.f_code.co_filename.startswith(
                self._ray_dir):
            return False
        task, busy = None, False
        while frame is not None:
            filename = frame.f_code.co_filename
            if not (filename.startswith(self._ray_dir) or filename.startswith("<frozen")
                    or (filename.startswith(self._stdlib)
                        and not filename.startswith(self._packages))):
                busy = True
                if self._is_reported(filename):
                    task = frame
            frame = frame.f_back
        if not busy:
            return False
        if task is not None:
            code = task.f_code
            name = getattr(code, "co_qualname", code.co_name)
            if name not in self.tasks and len(self.tasks) < 64:
                self.tasks.append(name)
        return True

    def _is_reported(self, filename: str) -> bool:
        return bool(self.session._selection.is_reported(filename))  # cached there

    def _send(self, *, final: bool) -> None:
        if self.actor is None:
            self.actor = _actor_class()
        if final:
            if self.session.running:
                self.session.stop()
            profile = self.session.profile(exit_code=None)
        else:
            profile = self.session.snapshot(trigger="request")
        doc = profile.to_dict()  # fields the model does not declare are top-level keys
        doc.update({"parent_pid": os.getppid(), "process_kind": "ray"})
        if self.info.get("node_id"):
            doc["node_id"] = self.info["node_id"]
        wire.send(self.sock, {"type": "profile", "final": final, "profile": doc,
                              "tasks": list(self.tasks), "actor": self.actor})


def _snapshot_every() -> float:
    try:
        value = float(os.environ.get("PEAKLINE_RAY_SNAPSHOT_EVERY", DEFAULT_SNAPSHOT_EVERY_S))
    except ValueError:
        return DEFAULT_SNAPSHOT_EVERY_S
    return value if value > 0 else DEFAULT_SNAPSHOT_EVERY_S


def _actor_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_actor_id()
    except Exception:  # noqa: BLE001 - a label only
        return None


def _actor_class() -> str | None:
    """The class of the actor this worker hosts (None outside an actor), from the actor's
    handle as Ray prints it: ``Actor(Holder, 4f1c...)``."""
    if _actor_id() is None:
        return None
    try:
        import ray

        text = repr(ray.get_runtime_context().current_actor)
    except Exception:  # noqa: BLE001 - a label only
        return None
    if text.startswith("Actor(") and "," in text:
        return text[len("Actor("):].split(",", 1)[0].strip() or None
    return None


def _ray_ids() -> dict:
    try:
        import ray

        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "ray_worker_id": context.get_worker_id()}
    except Exception:  # noqa: BLE001 - ids are a label; profile without them
        return {}


def setup() -> None:
    """The worker's set-up (see the module doc). Profiles nothing when this process already
    has a session (the program's own ``peakline.start()``, or set up before)."""
    import json

    from peakline import api
    from peakline.session import Session, SessionOptions
    from peakline.snapshots import start_own_thread

    if api.is_profiling():
        return
    options = SessionOptions.from_json(json.loads(os.environ.get(wire.OPTIONS_ENV) or "{}"))
    sock = wire.connect()
    info = {**wire.who(), **_ray_ids()}
    wire.send(sock, {"type": "hello", "token": os.environ.get(wire.TOKEN_ENV), **info})
    session = Session(options, program=f"ray worker {info.get('ray_worker_id', os.getpid())}",
                      argv=list(sys.argv))
    agent = _Agent(sock, session, info)
    # The model is imported before the session starts: not measured as the worker's memory.
    import peakline.model.profile  # noqa: F401

    session.start()
    start_own_thread(agent.run)
