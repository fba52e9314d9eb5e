"""The Python API: profile part of a program from inside it, in an ordinary interpreter.

    with peakline.profile(outfile="fit.json") as p:      # context manager
        model.fit(X, y)
    p.profile.peak_bytes

    peakline.start(); ...; profile = peakline.stop()      # explicit

    @peakline.profile                                     # decorator: each call is profiled
    def train(): ...

    with peakline.phase("fit"): ...                       # named phases inside any profile

CPU and memory both work without a launcher: the core patches the already-loaded libraries'
allocation functions in place (docs/api.md). One profile at a time per process; children the
program starts while profiling are profiled and merged (peakline.child).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator

# Annotations only (never evaluated at run time: `from __future__ import annotations`). The
# typing module is not imported while the program runs: 0.6 MiB resident (peakline's own
# memory adds to the program's peak; docs/architecture.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

from peakline import run_options
from peakline.errors import ProfilerStateError
from peakline.session import (
    DEFAULT_CPU_INTERVAL_S,
    DEFAULT_MEMORY_INTERVAL_BYTES,
    Session,
    current_session,
)


# The API's run in progress; guarded by _lock (start/stop may come from any thread).
_lock = threading.RLock()
_active: _Run | None = None


class _Run:
    """One API profiling run: the session, its child tracker, where the profile goes."""

    def __init__(self, values, *, program: str) -> None:
        self.session = Session(run_options.session_options(values), program=program,
                               argv=list(sys.argv))
        self.outfile = os.path.abspath(values.outfile) if values.outfile else None
        self.tracker = None
        if values.children:
            from peakline.child import ChildTracker
            self.tracker = ChildTracker(self.session.options)  # as the session measures

    def start(self) -> None:
        # Imported before the session starts: not measured as the program's memory.
        from peakline import finishing, process_exits  # noqa: F401

        if self.tracker is not None:
            self.tracker.install()
        try:
            self.session.start()
        except BaseException:
            if self.tracker is not None:  # nothing ran: leave no directory behind
                self.tracker.uninstall()
                self.tracker.collect(shutdown_executors=False)
            raise
        process_exits.on_exec(self._before_exec)

    def _before_exec(self) -> None:
        """The process replaces itself (os.exec*): the profile so far is written first."""
        global _active
        with _lock:
            if _active is self and self.session.pid == os.getpid():
                _active = None
                self.stop()

    def stop(self):
        """Stops, builds the Profile (children merged), writes ``outfile`` if set."""
        from peakline import finishing, process_exits
        process_exits.remove_exec(self._before_exec)
        if self.session.pid != os.getpid():  # inherited through fork: end the child's own
            from peakline import child
            child.finish_forked_child(None)
            return None
        return finishing.finish_profile(self.session, self.tracker, exit_code=None,
                                        outfile=self.outfile)


def start(outfile: str | os.PathLike | None = None, *, cpu_only: bool = False,
          cpu_sampling_interval: float = DEFAULT_CPU_INTERVAL_S,
          memory_sampling_interval: int = DEFAULT_MEMORY_INTERVAL_BYTES,
          profile_all: bool = False, profile_only: Any = (), profile_exclude: Any = (),
          gpu: bool | None = None, children: bool = True, program: str | None = None) -> None:
    """Starts profiling this process (CPU and memory unless ``cpu_only``).

    The options are `peakline run`'s, by their API names (peakline/run_options.py, checked
    the same way, with the same messages: ValueError naming the keyword).
    ``outfile``: where ``stop()`` writes the profile file (none if not given).
    ``cpu_sampling_interval``: seconds of each thread's CPU time between two samples, from
    0.001 to 1. ``memory_sampling_interval``: mean bytes between two memory samples, a whole
    number from 1024 to 2**40 (attribution to lines; totals and the peak are exact either
    way). ``profile_all``, ``profile_only``, ``profile_exclude``: which files are reported
    (a substring or a list of them). ``gpu``: None (on when a device is found), True, False.
    ``children``: profile and merge the Python processes started meanwhile. Raises
    ProfilerStateError if this process is already being profiled (by the API, the CLI or a
    notebook magic)."""
    values = run_options.from_keywords({
        "outfile": outfile, "cpu_only": cpu_only, "cpu_sampling_interval": cpu_sampling_interval,
        "memory_sampling_interval": memory_sampling_interval, "profile_all": profile_all,
        "profile_only": profile_only, "profile_exclude": profile_exclude, "gpu": gpu,
        "children": children})
    start_values(values, program=program or _program_name())


def start_values(values, *, program: str) -> None:
    """``start()`` with options already parsed and checked (run_options: the magics read
    them from their command line)."""
    global _active
    with _lock:
        if _active is not None and _active.session.pid != os.getpid():
            _active = None  # inherited through fork: the parent's run, not this process's
        # In a child of a profiled program this explicit profile wins over the automatic
        # child session (docs/processes.md, "peakline inside a profiled child").
        child = sys.modules.get("peakline.child")
        if _active is None and child is not None:
            child.step_aside_for_explicit_use("peakline.start")
        if _active is not None or current_session() is not None:
            raise ProfilerStateError("peakline is already profiling this process")
        run = _Run(values, program=program)
        run.start()
        _active = run


def stop():
    """Stops the profile started by ``start()`` and returns it (a peakline.model.Profile)."""
    global _active
    with _lock:
        run = _active
        if run is None:
            raise ProfilerStateError("peakline is not profiling (call peakline.start() first)")
        _active = None
        return run.stop()


def _is_automatic(session: Session) -> bool:
    """Whether ``session`` is the automatic one of a profiled child (explicit use wins)."""
    child = sys.modules.get("peakline.child")
    return child is not None and child.automatic_session() is session


def is_profiling() -> bool:
    return current_session() is not None


def _program_name() -> str:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return os.path.basename(path) if path else (sys.argv[0] if sys.argv and sys.argv[0]
                                                 else "<python>")


class Profiler:
    """What ``peakline.profile(...)`` returns: a context manager and a decorator.

    As a context manager it profiles the block; ``.profile`` holds the Profile afterwards.
    As a decorator each outermost call of the function is profiled; with no ``outfile`` the
    terminal report is printed to stderr after the call (``report=False`` to silence).
    """

    def __init__(self, outfile: str | os.PathLike | None = None, *, report: bool | None = None,
                 **options: Any) -> None:
        self.outfile = outfile
        self.report = report
        self.options = options
        self.profile = None

    # -- context manager ------------------------------------------------------------------

    def __enter__(self) -> Profiler:
        self.profile = None
        start(self.outfile, **self.options)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.profile = stop()
        if self.report and self.profile is not None:
            self.print_report()

    # -- decorator ------------------------------------------------------------------------

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            session = current_session()
            if session is not None and not _is_automatic(session):
                return func(*args, **kwargs)  # nested or recursive: already measured
            options = dict(self.options)
            options.setdefault("program", f"{func.__module__}.{func.__qualname__}")
            start(self.outfile, **options)
            try:
                return func(*args, **kwargs)
            finally:
                self.profile = stop()
                wrapper.last_profile = self.profile  # type: ignore[attr-defined]
                report = self.report if self.report is not None else self.outfile is None
                if report and self.profile is not None:
                    self.print_report()
        wrapper.last_profile = None  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    def print_report(self, file=None, **kwargs: Any) -> None:
        """The terminal report (active lines only unless ``reduced=False``, as the command
        line's default) on ``file`` (default stderr)."""
        from peakline.reporters import terminal

        kwargs.setdefault("reduced", True)
        terminal.render(self.profile, file if file is not None else sys.stderr, **kwargs)


def profile(func: Callable | None = None, /, outfile: str | os.PathLike | None = None,
            **options: Any):
    """``with peakline.profile(...) as p:``, ``@peakline.profile`` or
    ``@peakline.profile(outfile=...)``. Options as for ``start()``, plus ``report``."""
    if func is not None and callable(func) and not isinstance(func, (str, os.PathLike)):
        return Profiler(outfile, **options)(func)
    if func is not None:  # profile("out.json") positional outfile
        outfile = func
    return Profiler(outfile, **options)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Names a phase of the profiled program (also usable as a decorator). The profile's
    ``phases`` list gets its wall interval, CPU time and heap (start, end, net, peak).
    Without a running profile it does nothing, so instrumented code runs unprofiled too."""
    session = current_session()
    record = session.begin_phase(name) if session is not None else None
    try:
        yield
    finally:
        if record is not None:
            session.end_phase(record)
