"""ProfileSource: what the live view reads, so that it can show a session of this process
(`peakline run --live`) or of another one (`peakline attach PID --live`) the same way.

A source has four members (docs/long-running.md, "Live view"):

* ``label``: one line naming what is profiled ("pid 4242 · train.py --epochs 3");
* ``poll()``: the profile so far (a ``peakline.model.Profile``; the view shows its
  ``elapsed_s``, totals, lines, threads, timeline and GPU), or None when there is nothing new
  to show yet. Called every refresh (1 s) on the view's thread; may take a while (it builds a
  profile) but must not block for long;
* ``stop()``: stop profiling, leaving the program running (the view's quit key). Idempotent;
* ``running``: False once the program ended or profiling stopped (the view then shows the
  last profile and says so).

The view never calls anything else, and never touches the core.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from peakline.model.profile import Profile
    from peakline.session import Session


class SessionSource:
    """A session of this process, read by ``Session.snapshot`` (the core's counters are read
    without being reset)."""

    def __init__(self, session: Session, label: str) -> None:
        self.session = session
        self.label = label
        self.stopped_by_view = False

    @property
    def running(self) -> bool:
        return self.session.running

    def poll(self) -> Profile | None:
        if not self.session.running:
            return None
        from peakline.errors import ProfilerStateError

        try:
            return self.session.snapshot(trigger="request")
        except ProfilerStateError:   # stopped meanwhile (the program ended)
            return None

    def stop(self) -> None:
        if self.session.running:
            from peakline.errors import ProfilerStateError

            try:
                self.session.stop()
                self.stopped_by_view = True
            except ProfilerStateError:
                pass


class SnapshotFileSource:
    """Snapshot files of another process (``--snapshot-every`` writes them atomically):
    ``poll`` reads the file when it changed. ``stop`` calls ``on_stop`` (e.g. detach) if given;
    ``running`` is False after ``stop`` or once ``alive()`` says so."""

    def __init__(self, path: str, label: str, *, on_stop=None, alive=None) -> None:
        self.path = path
        self.label = label
        self._on_stop = on_stop
        self._alive = alive
        self._stopped = False
        self._seen: tuple[int, int] | None = None

    @property
    def running(self) -> bool:
        return not self._stopped and (self._alive is None or bool(self._alive()))

    def poll(self) -> Profile | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp == self._seen:
            return None
        from peakline.errors import ProfileFormatError
        from peakline.model.profile_file import read_profile

        try:
            profile = read_profile(self.path)
        except ProfileFormatError:
            return None
        self._seen = stamp
        return profile

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            if self._on_stop is not None:
                self._on_stop()
