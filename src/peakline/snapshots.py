"""Snapshots of a running session: the profile so far, written to the profile file's path while
the program keeps running (`peakline run --snapshot-every SECONDS`, the snapshot signal;
docs/long-running.md).

One thread of peakline's own does the work: it is excluded from the measurement in the core
(``session.exclude_current_thread``: never sampled, its allocations not counted), started
before the session with every signal blocked (a signal meant for the program never lands on
it), and created with ``_thread`` so that ``threading.enumerate()`` does not list it. It
sleeps until the next interval or a request, then reads the core's counters without resetting
them (``Session.snapshot``), builds the profile and writes it atomically
(``write_profile``: a reader sees the previous snapshot or the new one, never half of one).
Building holds the GIL while Python code runs: that, and the model's modules imported on the
first snapshot, is what a snapshot costs the program
(docs/benchmarks.md, "Snapshots of a running session").

The snapshot signal (SIGUSR2 by default, only with --snapshot-every or --live, or named by
--snapshot-signal; without them the program's signals stay its own) has a Python handler that only wakes the thread. The
program does not see it: ``signal.getsignal`` reports the program's own disposition, and a
handler the program installs is called by peakline's after the request, as the only handler
would be (program_signals.py, "chained signals").
"""

from __future__ import annotations

import _thread
import os
import signal
import time

# Annotations only: nothing else is imported while the program runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from peakline.session import Session


def parse_signal(text: str) -> int | None:
    """--snapshot-signal: a signal name (SIGUSR2, USR2), a number, or "none" (None)."""
    from peakline.errors import UsageError

    value = text.strip()
    if value.lower() == "none":
        return None
    if value.isdigit():
        number = int(value)
    else:
        name = value.upper()
        if not name.startswith("SIG"):
            name = "SIG" + name
        number = getattr(signal, name, None)
        if not isinstance(number, int):
            raise UsageError(f"--snapshot-signal: unknown signal {text!r}")
    number = int(number)
    forbidden = {int(getattr(signal, n)) for n in ("SIGKILL", "SIGSTOP", "SIGINT", "SIGTERM",
                                                   "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL",
                                                   "SIGABRT", "SIGCHLD") if hasattr(signal, n)}
    if number not in signal.valid_signals() or number in forbidden or number <= 0:
        raise UsageError(f"--snapshot-signal: {text!r} cannot be used (give a signal such as "
                         "SIGUSR1, SIGUSR2 or SIGHUP, or none)")
    if signal.SIGRTMIN <= number <= signal.SIGRTMAX:
        raise UsageError(f"--snapshot-signal: {text!r} is a real-time signal, which peakline "
                         "may use for CPU sampling; give SIGUSR1, SIGUSR2 or SIGHUP, or none")
    return number


def start_own_thread(function, *args) -> int:
    """Starts ``function(*args)`` on a new thread of peakline's own with every signal blocked
    (the new thread inherits the creator's mask) and returns its ident."""
    blockable = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"):
        blockable.discard(getattr(signal, name))
    saved = signal.pthread_sigmask(signal.SIG_BLOCK, blockable)
    try:
        return _thread.start_new_thread(function, args)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, saved)


class SnapshotWriter:
    """Writes ``session.snapshot()`` to ``path`` every ``every_s`` seconds (None: only on
    request) and on ``request()``. ``start()`` before the session starts, ``close()`` before it
    stops (no snapshot is under way once it returns)."""

    def __init__(self, session: Session, path: str, every_s: float | None) -> None:
        self.session = session
        self.path = path
        self.every_s = every_s
        self.written = 0
        self.errors: list[str] = []          # one line per failed snapshot (reported at the end)
        self._wake = _thread.allocate_lock()
        self._wake.acquire()                 # released by request() / close()
        self._busy = _thread.allocate_lock()  # held while a snapshot is built and written
        self._done = _thread.allocate_lock()  # held by the thread until it has left
        self._pending: str | None = None
        self._closing = False
        self._ready = _thread.allocate_lock()
        self._ready.acquire()
        self._started = False

    def start(self) -> None:
        self._done.acquire()
        start_own_thread(self._run)
        self._ready.acquire()   # the thread has excluded itself from the measurement
        self._started = True

    def request(self, trigger: str = "signal") -> None:
        """A snapshot as soon as possible (from a signal handler: only wakes the thread)."""
        if self._closing:
            return
        self._pending = trigger
        try:
            self._wake.release()
        except RuntimeError:  # already woken
            pass

    def close(self) -> None:
        """Stops the thread, waiting for a snapshot under way to be written."""
        if not self._started or self._closing:
            return
        self._closing = True
        try:
            self._wake.release()
        except RuntimeError:
            pass
        self._done.acquire()
        self._done.release()

    def _run(self) -> None:
        try:
            from peakline.session import exclude_current_thread

            exclude_current_thread()
        finally:
            self._ready.release()
        try:
            next_at = None if self.every_s is None else time.monotonic() + self.every_s
            while not self._closing:
                timeout = -1 if next_at is None else max(0.0, next_at - time.monotonic())
                woken = self._wake.acquire(timeout=timeout)
                if self._closing:
                    break
                trigger = self._pending if woken and self._pending else "interval"
                self._pending = None
                if not woken and next_at is not None:
                    next_at += self.every_s
                    if next_at < time.monotonic():   # a slow snapshot: skip, do not pile up
                        next_at = time.monotonic() + self.every_s
                self.write(trigger)
        finally:
            from peakline.session import own_thread_ending

            own_thread_ending()
            self._done.release()

    def write(self, trigger: str) -> bool:
        """Takes and writes one snapshot now (on the calling thread); False if it failed."""
        with self._busy:
            if not self.session.running:
                return False
            try:
                profile = self.session.snapshot(trigger=trigger)
                from peakline.model.profile_file import write_profile

                write_profile(profile, self.path)
            except Exception as error:  # noqa: BLE001 - the program goes on either way
                self.errors.append(f"{type(error).__name__}: {error}")
                return False
            self.written += 1
            return True


class SnapshotSignal:
    """The snapshot signal's handler, chained to the program's (program_signals.py)."""

    def __init__(self, signum: int, writer: SnapshotWriter) -> None:
        self.signum = signum
        self.writer = writer
        self.pid = os.getpid()
        self.handler = self._make_handler()

    def _make_handler(self):
        from peakline.program_signals import call_program_handler

        writer, pid = self.writer, self.pid

        def on_snapshot_signal(signum, frame):
            if os.getpid() == pid:   # a fork child has no snapshot thread
                writer.request("signal")
            call_program_handler(signum, frame)

        on_snapshot_signal._peakline_handler = True  # type: ignore[attr-defined]
        return on_snapshot_signal

    def install(self) -> None:
        from peakline import program_signals

        program_signals.install_chained_handler(self.signum, self.handler)

    def uninstall(self) -> None:
        from peakline import program_signals

        program_signals.uninstall_chained_handler(self.signum, self.handler)

