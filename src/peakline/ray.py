"""Profile the tasks and actors of a Ray job on every worker: ``peakline run ray_script.py``.

While peakline profiles a program with children (``peakline run``; ``peakline.start()``
by default), the program's environment names ``runtime_env_hook`` in ``RAY_RUNTIME_ENV_HOOK``,
the variable through which Ray lets a deployment adjust a job's runtime_env. ``ray.init()``
(starting a local cluster or connecting to one) calls it, and it adds to the job's
runtime_env, through Ray's own fields only:

* ``worker_process_setup_hook``: a small function (shipped by value) that each worker of the
  job runs before its first task. It starts a peakline session there
  (peakline._ray_agent) — or, where peakline cannot be imported, tells the driver so;
* ``env_vars``: where the driver's collector listens (peakline._ray_collector, a TCP port of
  the driver; ``PEAKLINE_RAY_DRIVER_ADDRESS`` names the address workers reach it by), a
  token, the driver's options, and ``PEAKLINE_CHILD_DIR`` emptied: the workers of a local
  cluster are children of the program too, and are profiled through this hook, once.

A runtime_env hook the environment already names runs first, and a
``worker_process_setup_hook`` of the program's own runs in each worker after peakline's.
When the driver's profile is built, each worker hands in its final profile, or the one it
handed in last if it is gone (docs/distributed.md, "Ray"); they are merged as child
processes, each with its Ray node, worker, actor class and task functions.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from peakline import _ray_wire as wire
from peakline.child import OPTIONS_ENV  # the session's options
from peakline._ray_env import RAY_DRIVER_ENV as DRIVER_ENV  # the pid the hook acts in
from peakline._ray_env import RAY_PREVIOUS_HOOK_ENV as PREVIOUS_HOOK_ENV
from peakline.errors import ProfilerStateError

MINIMUM_RAY = (2, 9)  # worker_process_setup_hook with a function or a module path


_collector = None
_refused: str | None = None


def check_ray_version(version: str) -> None:
    """Raises ProfilerStateError when Ray ``version`` lacks what peakline uses."""
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    if tuple(parts) < MINIMUM_RAY:
        need = ".".join(map(str, MINIMUM_RAY))
        raise ProfilerStateError(
            f"peakline: Ray {version} lacks the runtime_env worker_process_setup_hook that "
            f"peakline profiles Ray workers through (Ray >= {need}): this job's workers are "
            "not profiled (the driver is)")


def runtime_env_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any] | None:
    """``RAY_RUNTIME_ENV_HOOK``: the job's runtime_env with peakline's worker set-up added."""
    global _collector, _refused
    previous = os.environ.get(PREVIOUS_HOOK_ENV)
    if previous:
        from importlib import import_module

        module, _, name = previous.rpartition(".")
        runtime_env = getattr(import_module(module), name)(runtime_env)
    options_json = os.environ.get(OPTIONS_ENV)
    if os.environ.get(DRIVER_ENV) != str(os.getpid()) or not options_json:
        return runtime_env  # not the profiled process (the variables were inherited)
    import ray

    try:
        check_ray_version(ray.__version__)
    except ProfilerStateError as error:
        if _refused is None:
            _refused = str(error)
            print(_refused, file=sys.stderr, flush=True)
        return runtime_env
    if _collector is None:
        from peakline._ray_collector import Collector

        _collector = Collector()
    out = dict(runtime_env or {})
    env_vars = dict(out.get("env_vars") or {})
    env_vars.update({wire.COLLECTOR_ENV: _collector.address, wire.TOKEN_ENV: _collector.token,
                     wire.OPTIONS_ENV: options_json, "PEAKLINE_CHILD_DIR": ""})
    out["env_vars"] = env_vars
    out["worker_process_setup_hook"] = worker_setup_function(out.get("worker_process_setup_hook"))
    return out


_SETUP_SOURCE = '''
def peakline_worker_setup(user_hook=None):
    import os, sys
    try:
        import peakline._ray_agent as agent
    except Exception as exc:
        reason = "peakline cannot be imported there (%s: %s)" % (type(exc).__name__, exc)
        sys.stderr.write("peakline: this Ray worker (pid %d) is not profiled: %s\\n"
                         % (os.getpid(), reason))
        try:
            import json, socket, struct
            host, _, port = os.environ["PEAKLINE_RAY_COLLECTOR"].rpartition(":")
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                for message in ({"type": "hello", "pid": os.getpid(),
                                 "hostname": socket.gethostname(),
                                 "token": os.environ.get("PEAKLINE_RAY_TOKEN")},
                                {"type": "error", "message": reason}):
                    data = json.dumps(message).encode("utf-8")
                    sock.sendall(struct.pack(">I", len(data)) + data)
        except Exception:
            pass
    else:
        try:
            agent.setup()
        except Exception as exc:
            sys.stderr.write("peakline: this Ray worker (pid %d) is not profiled: %s\\n"
                             % (os.getpid(), exc))
    if isinstance(user_hook, str):
        from importlib import import_module
        module, _, name = user_hook.rpartition(".")
        user_hook = getattr(import_module(module), name)
    if user_hook is not None:
        user_hook()
'''


def worker_setup_function(user_hook=None):
    """The set-up function each worker runs. It is built here from source, in a namespace of
    its own, so that Ray ships it by value (cloudpickle): a worker where peakline is not
    importable runs it too, and reports that (the wire format in peakline._ray_wire)."""
    namespace: dict[str, Any] = {"__name__": "peakline_ray_worker_setup"}
    exec(compile(_SETUP_SOURCE, "<peakline ray worker setup>", "exec"), namespace)
    function = namespace["peakline_worker_setup"]
    function.__defaults__ = (user_hook,)
    return function


_handed_in: tuple[list, list[dict]] = ([], [])


def hand_in() -> int:
    """Asks every worker of the profiled job for its final profile now and keeps them for the
    driver's profile; returns how many handed one in. For a program that shuts Ray down
    itself: call it right before ``ray.shutdown()``, which ends the workers at once (without
    it, each worker's profile is the one it handed in when it last went idle, if it could).
    The workers are not profiled after it; a later ``ray.init()`` profiles its job's
    workers afresh. Does nothing outside a profiled driver."""
    global _collector
    collector, _collector = _collector, None
    if collector is None:
        return 0
    profiles, missing = collector.finish()
    _handed_in[0].extend(profiles)
    _handed_in[1].extend(missing)
    return len(profiles)


def collect() -> tuple[list, list[dict]]:
    """The Ray workers' profiles and the records of the workers that left none (empty when
    no job of this process was profiled); called when the driver's profile is built."""
    hand_in()
    profiles, missing = list(_handed_in[0]), list(_handed_in[1])
    _handed_in[0].clear()
    _handed_in[1].clear()
    profiles.sort(key=lambda p: (p.started_at, p.pid))
    return profiles, missing
