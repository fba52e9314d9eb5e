"""What the child mechanism (peakline/child.py) knows of Ray, standard library only: the
variables that make ``ray.init()`` in a profiled program call peakline's runtime_env hook
(peakline/ray.py), and how Ray's own processes are told apart from the program's children."""

from __future__ import annotations

import os
import sys

# The runtime_env hook that profiles a job's workers, the pid it acts in, and a hook the
# environment named before peakline (run first by peakline's).
RAY_HOOK_ENV = "RAY_RUNTIME_ENV_HOOK"
RAY_HOOK = "peakline.ray.runtime_env_hook"
RAY_DRIVER_ENV = "PEAKLINE_RAY_DRIVER"
RAY_PREVIOUS_HOOK_ENV = "PEAKLINE_RAY_PREVIOUS_HOOK"


def hand_in_ray_workers() -> None:
    """The profiled Ray job's workers hand in their final profiles now (peakline/ray.py);
    kept until the children are collected. Nothing when no job was profiled here."""
    ray_support = sys.modules.get("peakline.ray")  # imported by ray.init()'s hook
    if ray_support is not None:
        ray_support.hand_in()


def is_ray_process(orig_argv: list[str]) -> bool:
    """Whether this interpreter runs one of Ray's own processes (its script lies in the ray
    package, or ``-m ray...``): a local Ray node's log monitor, dashboard, agents, and its
    workers before and after their runtime_env set-up. They are not profiled as children: the
    services are not the program's, and the job's workers are profiled through Ray's
    worker set-up hook (peakline/ray.py), once each."""
    args = iter(orig_argv[1:])
    for arg in args:
        if arg in ("-X", "-W"):
            next(args, None)
        elif arg == "-m":
            module = next(args, "")
            return module == "ray" or module.startswith("ray.")
        elif arg == "-c" or arg == "-":
            return False
        elif not arg.startswith("-"):
            parts = os.path.abspath(arg).split(os.sep)
            for i in range(len(parts) - 2, 0, -1):
                if parts[i] == "ray" and os.path.isdir(os.sep.join([*parts[:i + 1],
                                                                    "_private"])):
                    return True
            return False
    return False
