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

A source may also have ``ended``: True once there is nothing more to show (the attached
process exited, or a ``--duration`` ran out); the view then closes by itself.

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


class AttachSource:
    """A process attached to by ``peakline attach PID --live`` (peakline.attach.Attachment):
    ``poll`` asks the target for its data so far (``Attachment.profile_so_far``) and builds the
    profile here; ``stop`` detaches (the target's session stops and is undone there) and keeps
    the final profile in ``final``; ``running`` while attached and the target is alive.

    ``final`` is also set when the target exits while attached (its data arrives unasked) or
    when ``deadline`` (``time.monotonic()`` seconds; ``--duration``) passes: then ``ended``."""

    def __init__(self, attachment, label: str, *, deadline: float | None = None) -> None:
        self.attachment = attachment
        self.label = label
        self.deadline = deadline
        self.final: Profile | None = None
        self.error: BaseException | None = None   # the connection failed (AttachError)
        self.stopped_by_view = False
        self.interrupted = False   # Ctrl-C (attach_live): the view ends, the caller detaches

    @property
    def running(self) -> bool:
        return (self.final is None and not self.attachment.detached
                and _alive(self.attachment.pid))

    @property
    def ended(self) -> bool:
        return self.final is not None or self.error is not None or self.interrupted

    def poll(self) -> Profile | None:
        import time

        if self.final is not None or self.error is not None or self.attachment.detached:
            return None
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self._detach()
            return self.final
        from peakline.attach import AttachError
        from peakline.errors import ProfilerStateError

        try:
            profile = self.attachment.profile_so_far()
        except ProfilerStateError:   # the target is exiting: its final data follows
            try:
                data = self.attachment.wait_for_exit(5.0)
                if data is not None:
                    self.final = self.attachment.build(data)
            except AttachError as error:
                self.error = error
            return self.final
        except AttachError as error:  # the connection broke (the target was killed)
            self.error = error
            return None
        if self.attachment.detached:  # the target exited: this is its final profile
            self.final = profile
        return profile

    def stop(self) -> None:
        if self.final is None and self.error is None and not self.attachment.detached:
            self._detach()
            self.stopped_by_view = self.final is not None

    def _detach(self) -> None:
        from peakline.attach import AttachError

        try:
            self.final = self.attachment.detach()
        except AttachError as error:
            self.error = error


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
