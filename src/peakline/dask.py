"""Profile the workers of a Dask (distributed) cluster: ``peakline.dask.profile(client)``.

    import peakline.dask
    with peakline.dask.profile(client, outfile="workers.json") as result:
        client.gather(client.map(work, items))
    print(result.profile.peak_bytes_sum)

Entering registers a worker plugin (``PeaklinePlugin``) that starts a peakline session in every
worker process of the cluster (and in workers that join later); leaving collects each
worker's profile through the client (``Client.run``: the worker stops its session and returns
the profile as data), unregisters the plugin and merges the profiles
(``peakline.model.merge.merge_profiles``): per line and function summed, one process per
worker with its host and the worker's address as ``node_id``, each worker's own peak and their
sum. The client's own process is not profiled by this (use ``peakline run`` or
``peakline.profile()`` around it). A worker where peakline cannot be imported, whose session
did not start, or that left the cluster before the end (died: its profile is lost with it) is
named in a ``ProfilerStateError`` raised on leaving, with the profiles of the others still
merged into ``result.profile`` first.

Workers of a ``LocalCluster`` that a ``peakline run`` program starts are its children and are
profiled without this (docs/distributed.md); this is for clusters peakline did not start.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from peakline.errors import ProfilerStateError

PLUGIN_NAME = "peakline"


TASKS_PLUGIN_NAME = "peakline-task-keys"


class TaskKeysPlugin(WorkerPlugin):
    """Reports when each task runs in the worker (``transition`` into and out of
    ``executing``) to the worker's peakline session, by key prefix (``key_split``): the
    profile's ``task_keys`` (peakline.tasks). Does nothing in a worker that is not profiled."""

    idempotent = True

    def transition(self, key, start, finish, **kwargs) -> None:
        from peakline import tasks

        if finish == "executing":
            from dask.utils import key_split

            tasks.task_started(key, key_split(key))
        elif start == "executing":
            tasks.task_ended(key)


async def dask_setup(worker) -> None:
    """Dask preload hook (``distributed.worker.preload``): adds ``TaskKeysPlugin`` to a worker
    as it starts. ``peakline run`` preloads it into the Dask workers the program starts
    (peakline.child)."""
    await worker.plugin_add(TaskKeysPlugin(), name=TASKS_PLUGIN_NAME)


class PeaklinePlugin(TaskKeysPlugin):
    """Starts a peakline session in the worker's process (``setup``) and reports its tasks
    (``TaskKeysPlugin``); ``teardown`` drops an uncollected session. Pickled to the workers:
    they need peakline installed."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    def setup(self, worker) -> None:
        import peakline
        from peakline import api

        if api.is_profiling():
            return  # already profiled (a child of a profiled program, or set up before)
        peakline.start(children=False, program=f"dask worker {worker.address}", **self.options)
        os.environ["PEAKLINE_NODE_ID"] = str(worker.address)

    def teardown(self, worker) -> None:
        from peakline import api

        if api.is_profiling():
            try:
                api.stop()
            except Exception:  # noqa: BLE001 - a worker shutting down must not fail for this
                pass


def _stop_and_return(dask_worker=None) -> dict[str, Any]:
    """Runs in each worker: its profile as a plain dict (None when it was not profiling)."""
    from peakline import api

    if not api.is_profiling():
        return None
    return api.stop().to_dict()


def _why_not_profiled(client, address: str, answer: Any) -> str:
    """``address: why`` for a worker that sent no profile. peakline's own functions reach a
    worker by reference, so where peakline cannot be imported they fail to unpickle before
    they run, and the worker reports only a generic error: the import itself is tried there
    (``exec`` travels by reference to builtins) to say so."""
    probe = client.run(exec, "import peakline.dask", workers=[address], on_error="return")
    failed = probe.get(address)
    if isinstance(failed, ImportError):
        return f"{address}: peakline cannot be imported there ({type(failed).__name__}: {failed})"
    if isinstance(answer, BaseException):
        return f"{address}: {type(answer).__name__}: {answer}"
    return f"{address}: no peakline session (the plugin did not start one)"


class Result:
    """What ``profile()`` yields; ``profile`` is set on leaving (a peakline.model.Profile)."""

    def __init__(self) -> None:
        self.profile = None
        self.workers: list[str] = []


@contextmanager
def profile(client, outfile: str | os.PathLike | None = None, **options: Any):
    """Profiles every worker of ``client``'s cluster for the duration of the block.

    ``options``: as for ``peakline.start`` (``cpu_only``, ``cpu_sampling_interval``,
    ``memory_sampling_interval``, ``profile_all``, ``profile_only``, ``profile_exclude``,
    ``gpu``; peakline/run_options.py), checked here before any worker starts.
    ``outfile``: where the merged profile is written (none if not given)."""
    from peakline import run_options
    from peakline.model.merge import merge_profiles
    from peakline.model.profile import Profile

    run_options.from_keywords(options)  # ValueError, TypeError: here, not on every worker
    result = Result()
    # The workers there at the start (os.getpid travels by reference to os: any worker runs
    # it): one that is gone on leaving died or was retired with its profile.
    present = client.run(os.getpid, on_error="return")
    try:
        client.register_plugin(PeaklinePlugin(options), name=PLUGIN_NAME)
    except Exception:  # noqa: BLE001 - a worker that cannot load it (no peakline there) fails
        pass           # the broadcast; the others have it, and the collection names that one
    try:
        yield result
    finally:
        answers = client.run(_stop_and_return, on_error="return")
        try:
            client.unregister_worker_plugin(PLUGIN_NAME)
        except Exception:  # noqa: BLE001 - a cluster that lost the plugin already
            pass
        profiles, missing = [], []
        for address, answer in sorted(answers.items()):
            if isinstance(answer, dict):
                answer["node_id"] = str(address)
                profiles.append(Profile.from_dict(answer, source=f"dask worker {address}"))
                result.workers.append(str(address))
            else:
                missing.append(_why_not_profiled(client, address, answer))
        for address in sorted(set(present) - set(answers)):
            pid = present[address]
            missing.append(f"{address}: left the cluster before its profile was collected (the "
                           f"worker{f' (pid {pid})' if isinstance(pid, int) else ''} died or "
                           f"was retired): its profile is lost")
        if profiles:
            result.profile = profiles[0] if len(profiles) == 1 else merge_profiles(
                profiles, sources=result.workers)
            if outfile is not None:
                from peakline.model.profile_file import write_profile
                write_profile(result.profile, outfile)
        if missing:
            raise ProfilerStateError("peakline.dask: workers not profiled: " + "; ".join(missing))
