"""A profiling session: starts the C++ core, stops it, and builds the Profile.

This is the wiring between the extension (`peakline._core`, which measures) and the model
(`peakline.model`, which interprets). The CLI runner and the public API both go through it;
renderers never see the extension.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import dis
import os
import platform
import sys
import threading
import time
from typing import Any

from peakline.errors import ProfilerStateError

DEFAULT_CPU_INTERVAL_S = 0.01
# The aggregator wakes this often: it measures off-CPU (wait) time and drains samples.
TICK_INTERVAL_S = 0.02


@dataclasses.dataclass(frozen=True)
class SessionOptions:
    cpu_sampling_interval_s: float = DEFAULT_CPU_INTERVAL_S
    profile_all: bool = False
    profile_only: tuple[str, ...] = ()
    profile_exclude: tuple[str, ...] = ()
    sample_native_threads: bool = True
    memory: bool = True
    memory_sampling_interval_bytes: int = 512 * 1024
    copy_sampling_interval_bytes: int = 2 * 1024 * 1024
    # peakline's own entry points outside the package (the console script), never reported.
    internal_files: tuple[str, ...] = ()

    def as_profile_options(self) -> dict[str, Any]:
        return {
            "cpu_sampling_interval_s": self.cpu_sampling_interval_s,
            "profile_all": self.profile_all,
            "profile_only": list(self.profile_only),
            "profile_exclude": list(self.profile_exclude),
            "memory": self.memory,
            "memory_sampling_interval_bytes": self.memory_sampling_interval_bytes,
        }


def call_opcode_table() -> bytes:
    """256 flags: 1 for the opcodes that call a callable in this interpreter.

    Time the interpreter spends outside its eval loop while the current instruction is one
    of these is native time (a C builtin such as ``sorted`` runs); under any other
    instruction it is Python time (object protocols, arithmetic, GC on behalf of bytecode).
    Specialised forms (``CALL_BUILTIN_O`` …) and ``INSTRUMENTED_`` variants are included;
    ``CALL_INTRINSIC_*`` are interpreter internals, not calls of user-visible callables.
    """
    table = bytearray(256)
    opmap = getattr(dis, "_all_opmap", None) or dis.opmap
    for name, op in opmap.items():
        base = name.removeprefix("INSTRUMENTED_")
        if base.startswith(("CALL", "PRECALL")) and "INTRINSIC" not in base and 0 <= op < 256:
            table[op] = 1
    return bytes(table)


class _ThreadNames:
    """Remembers each thread's name by native id, also for threads that end before the
    profile is built: Thread.start is wrapped for the session (behaviour unchanged: the
    wrapper calls the original and then reads the started thread's id and name)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self._original = None

    def install(self) -> None:
        original = threading.Thread.start
        names = self.names

        def start(thread, *args, **kwargs):
            result = original(thread, *args, **kwargs)
            if thread.native_id is not None:
                names[thread.native_id] = thread.name
            return result

        self._original = original
        threading.Thread.start = start  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self._original is not None:
            threading.Thread.start = self._original  # type: ignore[method-assign]
            self._original = None

    def snapshot(self) -> dict[int, str]:
        live = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        return {**self.names, **live}


def _peak_rss_bytes() -> int:
    """The kernel's high-water mark of this process's resident set (Linux: KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _core():
    try:
        from peakline import _core
    except ImportError as exc:  # pragma: no cover - broken install
        raise ProfilerStateError(f"peakline's native core is not importable: {exc}") from exc
    return _core


class Session:
    """One profiling session of this process (the core allows one at a time)."""

    def __init__(self, options: SessionOptions | None = None, *, program: str = "",
                 argv: list[str] | None = None) -> None:
        self.options = options or SessionOptions()
        self.program = program
        self.argv = list(argv if argv is not None else sys.argv)
        self._started_wall: float | None = None
        self._started_mono = 0.0
        self._elapsed_s = 0.0
        self._raw: dict[str, Any] | None = None
        self._thread_names = _ThreadNames()
        self._selection = self._file_selection()

    @property
    def running(self) -> bool:
        return self._started_wall is not None and self._raw is None

    def start(self) -> None:
        core = _core()
        if core.active():
            raise ProfilerStateError("peakline is already profiling this process")
        interval_ns = int(round(self.options.cpu_sampling_interval_s * 1e9))
        self._started_wall = time.time()
        self._started_mono = time.perf_counter()
        self._thread_names.install()
        try:
            core.start(interval_ns, int(TICK_INTERVAL_S * 1e9), self.options.sample_native_threads,
                       threading.main_thread().native_id or 0, call_opcode_table(),
                       self.options.memory, self.options.memory_sampling_interval_bytes,
                       self.options.copy_sampling_interval_bytes, self._selection.is_reported)
        except RuntimeError as exc:
            self._thread_names.uninstall()
            self._started_wall = None
            raise ProfilerStateError(str(exc)) from exc

    def stop(self) -> None:
        if not self.running:
            raise ProfilerStateError("this profiling session is not running")
        core = _core()
        core.stop()
        self._thread_names.uninstall()
        self._elapsed_s = time.perf_counter() - self._started_mono
        self._raw = core.collect()

    def _file_selection(self):
        from peakline.model.selection import FileSelection

        return FileSelection(profile_all=self.options.profile_all,
                             profile_only=list(self.options.profile_only),
                             profile_exclude=list(self.options.profile_exclude),
                             internal_files=self.options.internal_files)

    def profile(self, *, exit_code: int | None = None):
        """Builds the Profile of a stopped session."""
        from peakline.model.builder import build_profile

        if self._raw is None:
            raise ProfilerStateError("stop the session before building its profile")
        started = _dt.datetime.fromtimestamp(self._started_wall or 0.0, tz=_dt.timezone.utc)
        meta = {
            "program": self.program,
            "argv": self.argv,
            "python_version": platform.python_version(),
            "platform": platform.platform(),
            "pid": os.getpid(),
            "started_at": started.isoformat().replace("+00:00", "Z"),
            "elapsed_s": self._elapsed_s,
            "exit_code": exit_code,
            "options": self.options.as_profile_options(),
            "thread_names": self._thread_names.snapshot(),
            "peak_rss_bytes": _peak_rss_bytes() if self.options.memory else None,
        }
        return build_profile(self._raw, meta=meta, selection=self._selection)
