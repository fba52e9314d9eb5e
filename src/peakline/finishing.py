"""How a profile ends: stop → build → merge the children's → write, once per process.

Three owners end a profile: `peakline run` (cli/run.py) when the program ends, however it
ends; the API (api.py) at ``stop()`` or before an ``os.exec*``; a profiled child process
(child.py) for its parent. What comes around the write differs (the reports; the child's
``parent_pid``); the write itself is ``finish_profile``, and its guard is ``WriteOnce``.

**Once.** The program's end, ``os._exit``, ``os.exec*`` and SIGTERM can each ask for the
profile, and one can come while another writes it: SIGTERM often lands while the profile is
being written at exit (``Pool.terminate`` right after the workers got their stop sentinel).
Unprofiled, SIGTERM kills at once; profiled, the handler writes what was measured and then
dies by the signal, and a SIGTERM that lands *while* the profile is written is kept and
re-raised as soon as the write is done: the process dies by it, with its profile whole.
"""

from __future__ import annotations

import os
import signal

from peakline import program_signals


def finish_profile(session, tracker=None, *, exit_code: int | None, outfile: str | None = None,
                   extra: dict | None = None, shutdown_executors: bool = True):
    """Stops ``session`` (if it still runs) before anything else, so none of peakline's own
    work is measured as the program's; stops ``tracker`` (a child.ChildTracker, or None) from
    profiling new children; builds the Profile; merges the profiles of the children that
    ended and lists those that did not; adds ``extra`` to ``profile.extra``; writes it to
    ``outfile`` when one is given. Returns the Profile.

    ``shutdown_executors``: first end joblib's idle reusable workers, so that they write
    their profiles (not on SIGTERM: the process must die now)."""
    if session.running:
        session.stop()
    if tracker is not None:
        tracker.uninstall()
    profile = session.profile(exit_code=exit_code)
    if tracker is not None:
        children, unfinished = tracker.collect(shutdown_executors=shutdown_executors)
        if children or unfinished:
            from peakline.model.merge import merge_processes
            profile = merge_processes(profile, children, unfinished)
    if extra:
        profile.extra.update(extra)
    if outfile:
        from peakline.model.profile_file import write_profile
        write_profile(profile, outfile)
    return profile


class WriteOnce:
    """Runs a profile's write at most once, in the process that created it (a fork child
    inherits the object, not the right to write), and defers a SIGTERM that lands meanwhile
    (see the module doc)."""

    __slots__ = ("pid", "done", "writing", "deferred")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.done = False      # a write ran or began here, or none is wanted any more
        self.writing = False
        self.deferred = 0      # a SIGTERM that came while writing: re-raised after it

    def owned(self) -> bool:
        return self.pid == os.getpid()

    def __call__(self, write, *args) -> None:
        """``write(*args)`` unless a write already ran or began in this process; then dies by
        the SIGTERM that came meanwhile, if one did."""
        if self.done or not self.owned():
            return
        self.done = self.writing = True
        try:
            write(*args)
        finally:
            self.writing = False
        if self.deferred:
            die_by(self.deferred)

    def close(self) -> None:
        """No write from now on (the program never started; nothing to write)."""
        self.done = True

    def sigterm(self, signum: int, finish) -> None:
        """The body of peakline's SIGTERM handler: ``finish(128 + signum)`` (which writes the
        profile through this object), then death by the signal; while a write is under way,
        the signal waits for it instead."""
        program_signals.sigterm_handler_started(signum)
        if self.writing and self.owned():
            self.deferred = signum
            return
        finish(128 + signum)
        die_by(signum)


def die_by(signum: int) -> None:
    """Ends the process by ``signum`` with its default action, as unprofiled."""
    program_signals.real_signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
