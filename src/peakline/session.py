"""A profiling session: starts the C++ core, stops it, and builds the Profile.

This is the wiring between the extension (`peakline._core`, which measures) and the model
(`peakline.model`, which interprets). The CLI runner and the public API both go through it;
renderers never see the extension.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import namedtuple

# Annotations only: no typing import while the program runs (see peakline/api.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from peakline.errors import ProfilerStateError
from peakline import _cgroup
from peakline._lean import all_opmap, free_threaded_build
from peakline.interpreter import check_supported
# Imported with the session, not when it stops: making its row types execs code, which would
# reset the interpreter's "uncaught KeyboardInterrupt" flag at exit (child.py, finish).
from peakline.model.raw import Thread

DEFAULT_CPU_INTERVAL_S = 0.01
DEFAULT_MEMORY_INTERVAL_BYTES = 512 * 1024
# The memory sampling interval a session accepts, in bytes (both ends included).
MEMORY_INTERVAL_RANGE_BYTES = (1024, 1 << 40)
# The aggregator wakes this often: it measures off-CPU (wait) time and drains samples.
TICK_INTERVAL_S = 0.02
# CPU sampling is reported as not working when the sampled CPU time covers less than this
# share of the CPU time the process used while profiled and misses more than this many
# seconds of it. Normal runs sample all but the last interval of each thread (and peakline's
# own threads, a few per cent), so the bounds are far from them.
_SAMPLED_CPU_SHARE_MIN = 0.5
_MISSING_CPU_MIN_S = 0.5


# Session start imports as little as it can: what is imported before the program runs is
# resident while it runs (typing alone is 0.6 MiB). The
# model and the reporters are imported when the profile is built.
_OPTION_DEFAULTS = {
    "cpu_sampling_interval_s": DEFAULT_CPU_INTERVAL_S,  # float
    "profile_all": False,
    "profile_only": (),      # tuple[str, ...]
    "profile_exclude": (),   # tuple[str, ...]
    "sample_native_threads": True,
    "memory": True,
    "memory_sampling_interval_bytes": DEFAULT_MEMORY_INTERVAL_BYTES,
    "copy_sampling_interval_bytes": 2 * 1024 * 1024,
    # GPU (docs/gpu.md): None = on when NVML finds a device or PyTorch uses CUDA; False = off.
    "gpu": None,
    # peakline's own entry points outside the package (the console script), never reported.
    "internal_files": (),    # tuple[str, ...]
}


class SessionOptions(namedtuple("_SessionOptions", _OPTION_DEFAULTS,
                                defaults=tuple(_OPTION_DEFAULTS.values()))):
    """What a session measures and reports (immutable; keyword construction)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """All fields as plain JSON (children get their parent's options this way)."""
        return {name: list(v) if isinstance(v := getattr(self, name), tuple) else v
                for name in self._fields}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionOptions:
        kwargs = {k: tuple(v) if isinstance(v, list) else v
                  for k, v in data.items() if k in cls._fields}
        return cls(**kwargs)

    def as_profile_options(self) -> dict[str, Any]:
        return {
            "cpu_sampling_interval_s": self.cpu_sampling_interval_s,
            "profile_all": self.profile_all,
            "profile_only": list(self.profile_only),
            "profile_exclude": list(self.profile_exclude),
            "memory": self.memory,
            "memory_sampling_interval_bytes": self.memory_sampling_interval_bytes,
        }


# Said once, on stderr, when a session that asked for memory profiling starts on such a build.
FREE_THREADED_MEMORY_MESSAGE = ("peakline: memory profiling is not available on free-threaded "
                                "CPython yet; profiling CPU time only")


def check_memory_sampling_interval(value: object) -> None:
    """ValueError unless value is a whole number of bytes in MEMORY_INTERVAL_RANGE_BYTES."""
    low, high = MEMORY_INTERVAL_RANGE_BYTES
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"the memory sampling interval must be a whole number of bytes from "
                         f"{low} (1K) to {high} (1T), got {value!r}")


# Specialised calls whose callee is always a Python function (3.11 to 3.15): the instruction
# pushes the callee's frame itself. Interpreter time outside the eval loop under one of these
# is that frame's set-up and, from 3.13 on, its clearing after the return (the caller is
# current again by then), or, in a tail-calling build of the interpreter (each instruction
# its own C function, as Debian's 3.14 and 3.15 are built), the instruction itself: Python
# time, not a C callable running.
PYTHON_FRAME_CALLS = frozenset({
    "CALL_PY_EXACT_ARGS", "CALL_PY_WITH_DEFAULTS", "CALL_PY_GENERAL",
    "CALL_BOUND_METHOD_EXACT_ARGS", "CALL_BOUND_METHOD_GENERAL", "CALL_ALLOC_AND_ENTER_INIT",
    "CALL_KW_PY", "CALL_KW_BOUND_METHOD"})


def call_opcode_table() -> bytes:
    """256 flags: 1 for the opcodes that call a callable in this interpreter.

    Time the interpreter spends outside its eval loop while the current instruction is one
    of these is native time (a C builtin such as ``sorted`` runs); under any other
    instruction it is Python time (object protocols, arithmetic, GC on behalf of bytecode).
    Specialised forms (``CALL_BUILTIN_O`` …) and ``INSTRUMENTED_`` variants are included,
    except those that only ever call a Python function (PYTHON_FRAME_CALLS);
    ``CALL_INTRINSIC_*`` are interpreter internals, not calls of user-visible callables.
    """
    table = bytearray(256)
    for name, op in all_opmap().items():
        base = name.removeprefix("INSTRUMENTED_")
        if (base.startswith(("CALL", "PRECALL")) and "INTRINSIC" not in base
                and base not in PYTHON_FRAME_CALLS and 0 <= op < 256):
            table[op] = 1
    return bytes(table)


class _ThreadNames:
    """Remembers each thread's name by native id, also for threads that end before the
    profile is built: Thread.start is wrapped for the session (behaviour unchanged: the
    wrapper calls the original and then reads the started thread's id and name).

    It also tells the core when a thread begins and ends: Thread._bootstrap_inner, which
    runs the thread's whole life on the thread itself, is wrapped so that the thread's CPU
    timer runs from its first instruction and the CPU after its last sample is counted
    (session/profiler.h, ThreadStarted / ThreadFinishing). A thread shorter than the sampling
    interval would otherwise be missing from the profile."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self._original = None
        self._original_inner = None

    def install(self, core=None) -> None:
        original = threading.Thread.start
        names = self.names

        def start(thread, *args, **kwargs):
            result = original(thread, *args, **kwargs)
            if thread.native_id is not None:
                names[thread.native_id] = thread.name
            return result

        self._original = original
        threading.Thread.start = start  # type: ignore[method-assign]
        inner = getattr(threading.Thread, "_bootstrap_inner", None)
        if core is not None and inner is not None:
            started, finishing = core.thread_started, core.thread_finishing

            def _bootstrap_inner(thread):
                started()
                try:
                    inner(thread)
                finally:
                    finishing()

            self._original_inner = inner
            threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]

    def uninstall(self) -> None:
        if self._original is not None:
            threading.Thread.start = self._original  # type: ignore[method-assign]
            self._original = None
        if self._original_inner is not None:
            threading.Thread._bootstrap_inner = self._original_inner  # type: ignore[attr-defined]
            self._original_inner = None

    def snapshot(self) -> dict[int, str]:
        live = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        return {**self.names, **live}


def peak_rss_bytes() -> int | None:
    """The kernel's high-water mark of this process's resident set, read from VmHWM.

    Not getrusage's ru_maxrss: that survives exec, so a program started by a large parent
    (a test runner, a notebook kernel, a benchmark harness) would report the parent's
    resident set as its own peak. VmHWM belongs to the address space, which exec replaces.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _signal_name(signo: int | None) -> str:
    import signal

    if not signo:
        return "the sampling signal"
    if signo == signal.SIGRTMAX:
        return "SIGRTMAX"
    if signal.SIGRTMIN <= signo < signal.SIGRTMAX:
        return f"SIGRTMAX-{signal.SIGRTMAX - signo}"
    return f"signal {signo}"


def sampling_warning(raw: dict[str, Any], process_cpu_ns: int,
                     sample_native_threads: bool = True) -> str | None:
    """Why the CPU figures of a finished session are incomplete, or None.

    Two signs: the kernel no longer runs peakline's handler for its signal (replaced by a raw
    system call, which the sigaction hooks cannot see), or the sampled CPU time falls far short
    of the CPU time the process used (threads that block the signal get no samples). Without
    native-thread sampling the second test does not apply (unsampled threads are expected).
    """
    stats = raw.get("stats", {})
    name = _signal_name(stats.get("cpu_signal"))
    if stats.get("cpu_signal_handler_replaced"):
        return (f"CPU sampling stopped: the handler of its signal ({name}) was replaced behind "
                "peakline's back; CPU figures are incomplete")
    if not sample_native_threads:
        return None
    sampled_ns = sum(Thread(*row).cpu_ns for row in raw.get("threads", ()))
    missing_ns = process_cpu_ns - sampled_ns
    if (missing_ns > _MISSING_CPU_MIN_S * 1e9
            and sampled_ns < _SAMPLED_CPU_SHARE_MIN * process_cpu_ns):
        return (f"CPU sampling covered only {sampled_ns / 1e9:.2f} s of the "
                f"{process_cpu_ns / 1e9:.2f} s of CPU this process used; threads that block "
                f"{name} are not sampled, CPU figures are incomplete")
    return None


def _core():
    check_supported()  # before the core is loaded: it reads this interpreter's structures
    try:
        from peakline import _core
    except ImportError as exc:  # pragma: no cover - broken install
        raise ProfilerStateError(f"peakline's native core is not importable: {exc}") from exc
    return _core


class PhaseRecord:
    """One named phase (``peakline.phase``): times relative to the session's start."""

    __slots__ = ("name", "depth", "start_s", "end_s", "cpu_start_s", "cpu_s")

    def __init__(self, name: str, depth: int, start_s: float, end_s: float | None = None,
                 cpu_start_s: float = 0.0, cpu_s: float | None = None) -> None:
        self.name = name
        self.depth = depth      # 0 for a top-level phase, 1 inside another phase, ...
        self.start_s = start_s
        self.end_s = end_s
        self.cpu_start_s = cpu_start_s
        self.cpu_s = cpu_s

    def __repr__(self) -> str:
        return "PhaseRecord(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


# The running session of this process (at most one: the core allows one at a time). Guarded
# by the GIL; read by peakline.phase and by the fork handler (peakline.child).
_current: Session | None = None


def current_session() -> Session | None:
    """The session profiling this process now, or None."""
    session = _current
    if session is not None and (session.pid != os.getpid() or not session.running):
        return None
    return session


class Session:
    """One profiling session of this process (the core allows one at a time).

    After ``os.fork`` the child inherits this object but not the core's threads and timers:
    ``abandon_after_fork`` (called by peakline.child's fork handler) marks it dead there, so
    nothing in the child ever waits for the parent's aggregator thread.
    """

    def __init__(self, options: SessionOptions | None = None, *, program: str = "",
                 argv: list[str] | None = None) -> None:
        self.options = options or SessionOptions()
        # Free-threaded builds: the memory hooks' sampled stacks and the Python-domain
        # wrappers rely on the GIL, so such a session measures CPU time only (its children
        # inherit memory=False with these options, and say nothing again).
        self._memory_refused = self.options.memory and free_threaded_build()
        if self._memory_refused:
            self.options = self.options._replace(memory=False)
        self.program = program
        self.argv = list(argv if argv is not None else sys.argv)
        self._started_wall: float | None = None
        self._started_mono = 0.0
        self._started_cpu_ns = 0
        self._throttling_start: tuple[int, int] | None = None
        self._throttling: tuple[float, int] | None = None  # (seconds, periods) over the run
        self._start_returned_mono = 0.0
        self._elapsed_s = 0.0
        self._raw: dict[str, Any] | None = None
        self._thread_names = _ThreadNames()
        self._selection = self._file_selection()
        self._torch_probe = None
        if self.options.gpu is not False:
            from peakline.gpu_torch import TorchCudaProbe

            self._torch_probe = TorchCudaProbe()
        self.pid = os.getpid()
        self.phases: list[PhaseRecord] = []
        self._open_phases: list[PhaseRecord] = []
        self._tasks = None  # peakline.tasks.TaskWindows, once an engine reports a task
        self.forked_away = False   # this object was inherited through fork: its core is gone
        # A sampling warning is printed to stderr at stop; off where stderr is not peakline's
        # (an attached process: the warning travels in the data instead).
        self.print_warnings = True
        self._snapshots = 0        # snapshots taken so far (their sequence numbers)
        # A snapshot (another thread) and stop never run in the core at the same time: the
        # core's stop releases the GIL while a snapshot's catch-up may be suspended in a
        # Python callback. Reentrant: a signal handler on the snapshotting thread may stop.
        self._core_lock = threading.RLock()

    @property
    def running(self) -> bool:
        return (self._started_wall is not None and self._raw is None
                and not self.forked_away)

    def _program_cpu_ns(self) -> int:
        """CPU the program used since the start, peakline's own threads left out (never below
        zero: the clocks are read one after another)."""
        return max(0, _program_cpu_now_ns() - self._started_cpu_ns)

    def elapsed_s(self) -> float:
        """Seconds since sampling started: so far while running, until stop once stopped."""
        if self._raw is not None:
            return self._elapsed_s
        return max(0.0, time.perf_counter() - self._started_mono)

    def start(self) -> None:
        global _current
        core = _core()
        if core.active():
            raise ProfilerStateError("peakline is already profiling this process")
        check_memory_sampling_interval(self.options.memory_sampling_interval_bytes)
        interval_ns = int(round(self.options.cpu_sampling_interval_s * 1e9))
        self._started_wall = time.time()
        self._started_mono = time.perf_counter()
        self._started_cpu_ns = _program_cpu_now_ns()
        self._throttling_start = _cgroup.throttling()
        if self._memory_refused and sys.stderr is not None:
            try:
                print(FREE_THREADED_MEMORY_MESSAGE, file=sys.stderr, flush=True)
            except (OSError, ValueError):  # stderr closed by the program
                pass
        self._thread_names.install(core)
        for thread in threading.enumerate():  # 3.10's thread states lack the kernel id
            if thread.ident is not None and thread.native_id is not None:
                core.remember_native_thread_id(thread.ident, thread.native_id)
        from peakline import _dynamic_code
        core.set_dynamic_code_locator(_dynamic_code.locate)
        try:
            core.start(interval_ns, int(TICK_INTERVAL_S * 1e9), self.options.sample_native_threads,
                       threading.main_thread().native_id or 0, call_opcode_table(),
                       self.options.memory, self.options.memory_sampling_interval_bytes,
                       self.options.copy_sampling_interval_bytes, self._selection.is_reported,
                       self.options.gpu is not False, self._torch_probe)
        except RuntimeError as exc:
            self._thread_names.uninstall()
            self._started_wall = None
            raise ProfilerStateError(str(exc)) from exc
        self._start_returned_mono = time.perf_counter()
        self.pid = os.getpid()
        _current = self

    def stop(self) -> None:
        global _current
        if not self.running:
            raise ProfilerStateError("this profiling session is not running")
        core = _core()
        now = time.perf_counter()
        for phase in reversed(self._open_phases):  # phases still open end with the session
            self._close_phase(phase, now)
        self._open_phases.clear()
        if self._tasks is not None:  # tasks still running end with the session
            self._tasks.close_all(now - self._started_mono)
        with self._core_lock:
            core.stop()
            process_cpu_ns = self._program_cpu_ns()
            self._throttling = _cgroup.difference(self._throttling_start, _cgroup.throttling())
            self._thread_names.uninstall()
            self._elapsed_s = now - self._started_mono
            self._raw = core.collect()
        self._raw.setdefault("stats", {})["process_cpu_ns"] = process_cpu_ns
        warning = sampling_warning(self._raw, process_cpu_ns, self.options.sample_native_threads)
        self._raw["sampling_warning"] = warning
        if warning is not None and self.print_warnings and sys.stderr is not None:
            try:
                print(f"peakline: warning: {warning}", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # stderr closed by the program
                pass
        if self._torch_probe is not None and self._raw.get("gpu") is not None:
            self._raw["gpu"]["torch"] = self._torch_probe.finish(self._selection.is_reported)
        if _current is self:
            _current = None

    def abandon_after_fork(self) -> None:
        """In a fork child: this session belongs to the parent; forget it here."""
        global _current
        self.forked_away = True
        self._thread_names.uninstall()
        if _current is self:
            _current = None

    # -- phases (peakline.phase) ----------------------------------------------------------

    def begin_phase(self, name: str) -> PhaseRecord:
        phase = PhaseRecord(name=str(name), depth=len(self._open_phases),
                            start_s=time.perf_counter() - self._started_mono,
                            cpu_start_s=time.process_time())
        self._open_phases.append(phase)
        self.phases.append(phase)
        return phase

    def end_phase(self, phase: PhaseRecord) -> None:
        if phase.end_s is not None or self.forked_away:
            return
        self._close_phase(phase, time.perf_counter())
        if phase in self._open_phases:
            self._open_phases.remove(phase)

    def _close_phase(self, phase: PhaseRecord, now: float) -> None:
        phase.end_s = max(phase.start_s, now - self._started_mono)
        phase.cpu_s = max(0.0, time.process_time() - phase.cpu_start_s)

    # -- task windows (peakline.tasks) ----------------------------------------------------

    def task_windows(self):
        """This session's task windows (peakline.tasks.TaskWindows), created on first use."""
        if self._tasks is None:
            from peakline.tasks import TaskWindows

            self._tasks = TaskWindows(self._started_mono)
        return self._tasks

    def _file_selection(self):
        from peakline.model.selection import FileSelection

        return FileSelection(profile_all=self.options.profile_all,
                             profile_only=list(self.options.profile_only),
                             profile_exclude=list(self.options.profile_exclude),
                             internal_files=self.options.internal_files)

    @property
    def gpu_unavailable_reason(self) -> str | None:
        """After stop: why no GPU figures were measured although GPU profiling was on
        (e.g. "libnvidia-ml.so.1 not loadable: ..."), else None."""
        gpu = (self._raw or {}).get("gpu")
        if gpu is None or gpu.get("measured"):
            return None
        return gpu.get("unavailable") or "no NVIDIA device and no PyTorch CUDA use"

    def profile(self, *, exit_code: int | None = None):
        """Builds the Profile of a stopped session."""
        if self._raw is None:
            raise ProfilerStateError("stop the session before building its profile")
        return self._build(self._raw, elapsed_s=self._elapsed_s, exit_code=exit_code,
                           phases=self.phases, tasks=self._tasks)

    def snapshot(self, *, trigger: str = "request"):
        """The Profile so far of a running session, which keeps running: the core's counters
        are read, not reset (session/profiler.h, CollectRunningProfile), so every snapshot
        covers the run from its start. ``trigger`` ("interval", "signal", "request") and a
        sequence number go into the profile's ``snapshot`` field (docs/profile-format.md).

        GIL-side work on the calling thread: call it from a thread of peakline's own
        (``exclude_current_thread``), not from the program's, or its cost is charged to the
        program. Phases still open end at the snapshot's time in it (not in the session)."""
        now = time.perf_counter()
        taken_wall = time.time()
        raw = self.snapshot_raw()
        elapsed_s = max(0.0, now - self._started_mono)
        phases = []
        for phase in list(self.phases):
            if phase.end_s is None:
                phase = PhaseRecord(phase.name, phase.depth, phase.start_s,
                                    max(phase.start_s, elapsed_s), phase.cpu_start_s,
                                    max(0.0, time.process_time() - phase.cpu_start_s))
            phases.append(phase)
        self._snapshots += 1
        import datetime as _dt

        taken = _dt.datetime.fromtimestamp(taken_wall, tz=_dt.timezone.utc)
        info = {"sequence": self._snapshots, "trigger": trigger, "start_s": 0.0,
                "end_s": elapsed_s, "taken_at": taken.isoformat().replace("+00:00", "Z")}
        tasks = self._tasks.open_copies(elapsed_s) if self._tasks is not None else None
        return self._build(raw, elapsed_s=elapsed_s, exit_code=None, phases=phases,
                           snapshot=info, tasks=tasks)

    def snapshot_raw(self) -> dict[str, Any]:
        """The core's raw data so far of a running session (what ``snapshot`` builds its
        profile from, and what ``peakline attach`` sends to the attaching command, which builds
        the profile there): the counters are read, not reset; ``stats.process_cpu_ns`` is the
        process CPU so far without peakline's own threads; no sampling warning (the run is not
        over). Same caveats as ``snapshot``; ProfilerStateError if not running."""
        if not self.running:
            raise ProfilerStateError("this profiling session is not running")
        core = _core()
        with self._core_lock:
            if not self.running:
                raise ProfilerStateError("this profiling session is not running")
            raw = core.collect_running()
        raw.setdefault("stats", {})["process_cpu_ns"] = self._program_cpu_ns()
        raw["sampling_warning"] = None
        return raw

    def _build(self, raw, *, elapsed_s: float, exit_code: int | None, phases, snapshot=None,
               tasks=None):
        from peakline.model.builder import build_profile

        import datetime as _dt

        started = _dt.datetime.fromtimestamp(self._started_wall or 0.0, tz=_dt.timezone.utc)
        meta = {
            "program": self.program,
            "argv": self.argv,
            "pid": os.getpid(),
            "started_at": started.isoformat().replace("+00:00", "Z"),
            "elapsed_s": elapsed_s,
            "exit_code": exit_code,
            "options": self.options.as_profile_options(),
            "thread_names": self._thread_names.snapshot(),
            "peak_rss_bytes": peak_rss_bytes() if self.options.memory else None,
            "cgroup_throttling": self._throttling,
        }
        profile = build_profile(raw, meta=meta, selection=self._selection)
        if phases or snapshot or tasks:
            from peakline.model.profile import Profile

            doc = profile.to_dict()
            # Phase and task times count from _started_mono (perf_counter = CLOCK_MONOTONIC
            # on Linux, taken just before core.start); the core's times count from its own
            # zero a little later. Align exactly when the core says where its zero was.
            # Without it, the core's zero is taken as the moment core.start returned (its
            # zero is set before the hooks are installed, which is most of the start time).
            core_zero_ns = raw.get("stats", {}).get("start_monotonic_ns")
            shift_s = (core_zero_ns / 1e9 - self._started_mono if core_zero_ns
                       else self._start_returned_mono - self._started_mono)
            if phases:
                from peakline.model.phases import phase_fields

                doc["phases"] = phase_fields(phases, profile.timeline, shift_s=shift_s)
            if tasks:
                from peakline.model.task_keys import task_key_fields

                doc["task_keys"] = task_key_fields(tasks, profile.timeline, shift_s=shift_s)
            if snapshot:
                doc["snapshot"] = snapshot
            profile = Profile.from_dict(doc, source="snapshot" if snapshot else "phases")
        return profile


# CPU time of peakline's own threads, kept out of the process CPU time that the sampling check
# compares with the sampled CPU (sampling_warning): their CPU is not sampled, by design.
# Guarded by the GIL.
_own_threads: dict[int, int] = {}    # thread ident -> its CPU clock id, while it runs
_own_threads_ended_ns = 0            # CPU time of those that have ended


def exclude_current_thread() -> None:
    """Called first thing by a thread of peakline's own (the snapshot writer, the live view):
    the core never samples it, measures its waits or counts its allocations, in the running
    session and in later ones (session/profiler.h, ExcludeCurrentThread). The thread calls
    ``own_thread_ending()`` last thing."""
    _core().exclude_current_thread()
    try:
        _own_threads[threading.get_ident()] = time.pthread_getcpuclockid(threading.get_ident())
    except (AttributeError, OSError):
        pass


def own_thread_ending() -> None:
    global _own_threads_ended_ns
    if _own_threads.pop(threading.get_ident(), None) is not None:
        _own_threads_ended_ns += time.thread_time_ns()


def _program_cpu_now_ns() -> int:
    """The process's CPU time less peakline's own threads'. Their clocks are read first: read
    after the process's, they could hold CPU that the process's reading did not."""
    own = _own_threads_cpu_ns()
    return time.process_time_ns() - own


def _own_threads_cpu_ns() -> int:
    total = _own_threads_ended_ns
    for clock in list(_own_threads.values()):
        try:
            total += time.clock_gettime_ns(clock)
        except OSError:
            pass
    return total
