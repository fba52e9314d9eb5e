"""The live view's loop on the terminal, and its wiring into `peakline run --live`.

The terminal is shared with the program, so (docs/long-running.md, "Live view"):

* the view draws on ``/dev/tty`` (the controlling terminal, opened on its own), in the
  alternate screen, and reads its keys there in cbreak mode (no echo, no line buffering);
* the program's stdout and stderr (descriptors 1 and 2) go to a file while the view is shown
  (``--live-output``; default: the profile's path with ``.out``) and come back to where they
  were when the view closes, so the program never draws over the view and nothing it prints
  is lost; its stdin is left alone (a program that reads the terminal competes with the keys:
  give it a file or a pipe);
* the view runs on a thread of peakline's own (excluded from the measurement, every signal
  blocked); each refresh builds the profile so far (``ProfileSource.poll``), which holds the
  GIL for a while — the cost of the view to the program.

Quitting (q) stops profiling, never the program: the session stops, the view closes, the
program's output comes back to the terminal and the program runs on; the profile file is
written when it ends, covering the run up to the quit. When the program ends first, the view
closes and the report follows as usual.
"""

from __future__ import annotations

import os
import select
import time

from peakline.errors import UsageError
from peakline.runner import flush_std_streams

REFRESH_S = 1.0

TYPE_CHECKING = False
if TYPE_CHECKING:
    from peakline.live.source import ProfileSource
    from peakline.session import Session


def check_terminal() -> None:
    """--live: UsageError unless there is a terminal to draw on and Rich is installed."""
    try:
        import rich  # noqa: F401
    except ImportError:
        raise UsageError("--live needs the 'rich' package: pip install 'peakline[live]'") from None
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError as error:
        raise UsageError(f"--live needs a terminal (/dev/tty: {error.strerror or error})") from None
    os.close(fd)


def check_live(output: str | None, outfile: str) -> str:
    """`run --live`: check_terminal; returns the file for the program's output (absolute)."""
    check_terminal()
    if output is None:
        stem = outfile[:-5] if outfile.endswith(".json") else outfile
        output = stem + ".out"
    output = os.path.abspath(output)
    if os.path.isdir(output) or not os.path.isdir(os.path.dirname(output)):
        raise UsageError(f"--live-output {output}: not a file in an existing directory")
    return output


class LiveView:
    """Draws ``source`` on the terminal ``tty_fd`` until quit or ``close()``."""

    def __init__(self, source: ProfileSource, tty_fd: int, *, refresh_s: float = REFRESH_S,
                 on_quit=None) -> None:
        from peakline.live.screen import View

        self.source = source
        self.tty_fd = tty_fd
        self.refresh_s = refresh_s
        self.view = View.OVERVIEW
        self.profile = None
        self.quit = False
        self.closing = False
        self._on_quit = on_quit

    def run(self) -> None:
        import termios
        import tty

        from rich.console import Console
        from rich.live import Live

        from peakline.live.screen import View, render

        stream = os.fdopen(os.dup(self.tty_fd), "w", encoding="utf-8", errors="replace")
        saved = None
        try:
            saved = termios.tcgetattr(self.tty_fd)
            tty.setcbreak(self.tty_fd)
        except termios.error:
            saved = None
        console = Console(file=stream, force_terminal=True, color_system="standard")
        views = list(View)
        try:
            with Live(console=console, screen=True, auto_refresh=False,
                      redirect_stdout=False, redirect_stderr=False) as live:
                next_poll = 0.0
                while (not self.quit and not self.closing
                       and not getattr(self.source, "ended", False)):
                    now = time.monotonic()
                    if now >= next_poll:
                        profile = self.source.poll()
                        if profile is not None:
                            self.profile = profile
                        next_poll = now + self.refresh_s
                    self._draw(live, console, render)
                    key = self._key(max(0.0, next_poll - time.monotonic()))
                    if key in ("q", "Q"):
                        self.quit = True
                    elif key == "\t":
                        self.view = views[(views.index(self.view) + 1) % len(views)]
                    elif key is not None:
                        for v in views:
                            if key.lower() == v.value:
                                self.view = v
        finally:
            if saved is not None:
                try:
                    termios.tcsetattr(self.tty_fd, termios.TCSADRAIN, saved)
                except termios.error:
                    pass
            stream.close()
        if self.quit and self._on_quit is not None:
            self._on_quit()

    def _draw(self, live, console, render) -> None:
        try:
            width, height = os.get_terminal_size(self.tty_fd)
        except OSError:
            width, height = 100, 30
        console.size = (width, height)
        if self.source.running:
            status = f"refreshing every {self.refresh_s:g} s"
        else:
            status = "profiling stopped (the program runs on)"
        live.update(render(self.profile, self.view, label=self.source.label, status=status,
                           width=width, height=height), refresh=True)

    def _key(self, timeout_s: float) -> str | None:
        """One key from the terminal within timeout_s (at most 0.2 s, so close() is quick)."""
        try:
            ready, _, _ = select.select([self.tty_fd], [], [], min(timeout_s, 0.2))
        except (OSError, ValueError):
            time.sleep(min(timeout_s, 0.2))
            return None
        if not ready:
            return None
        try:
            data = os.read(self.tty_fd, 16)
        except OSError:
            return None
        return data.decode("utf-8", "replace")[:1] if data else None


class LiveRun:
    """`peakline run --live`: the view on a thread of peakline's own over the run's session,
    the program's stdout and stderr in ``output_path`` meanwhile."""

    def __init__(self, session: Session, output_path: str, outfile: str) -> None:
        from peakline.live.source import SessionSource

        label = f"pid {os.getpid()} · {' '.join(session.argv) or session.program}"
        self.source = SessionSource(session, label)
        self.output_path = output_path
        self.outfile = outfile
        self._tty = -1
        self._saved_fds: list[tuple[int, int]] = []
        self._view: LiveView | None = None
        self._done = None
        self._lock = None
        self.closed = False

    def start(self) -> None:
        """Before the session starts: the program's output to the file, the view's thread."""
        import _thread

        from peakline.snapshots import start_own_thread

        self._tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        self._redirect_output()
        self._view = LiveView(self.source, self._tty, on_quit=self._after_quit)
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._lock = _thread.allocate_lock()
        start_own_thread(self._run)

    def _run(self) -> None:
        try:
            from peakline.session import exclude_current_thread

            exclude_current_thread()
            self._view.run()  # type: ignore[union-attr]
        except Exception as error:  # noqa: BLE001 - the program runs on without the view
            self._restore_output()
            self._note(f"peakline: the live view failed: {type(error).__name__}: {error}")
        finally:
            from peakline.session import own_thread_ending

            own_thread_ending()
            self._done.release()  # type: ignore[union-attr]

    def _after_quit(self) -> None:
        # On the view's thread, after the screen is restored: profiling stops, the program's
        # output comes back, and it runs on.
        self.source.stop()
        self._restore_output()
        self._note(f"peakline: live view closed: profiling stopped, the program runs on; its "
                   f"output until now is in {self.output_path}; the profile will be written to "
                   f"{self.outfile} when it ends")

    def close(self) -> None:
        """The program ended (or is ending): close the view, output back, terminal back."""
        if self._view is None or self.closed:
            return
        self.closed = True
        self._view.closing = True
        self._done.acquire()  # type: ignore[union-attr]
        self._done.release()  # type: ignore[union-attr]
        self._restore_output()
        if not self._view.quit:
            self._note(f"peakline: the program's output while the live view was shown is in "
                       f"{self.output_path}")
        try:
            os.close(self._tty)
        except OSError:
            pass

    def _redirect_output(self) -> None:
        flush_std_streams()
        out = os.open(self.output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                      | os.O_CLOEXEC, 0o666)
        try:
            for fd in (1, 2):
                try:
                    saved = os.dup(fd)
                except OSError:
                    continue
                os.set_inheritable(saved, False)
                os.dup2(out, fd)
                self._saved_fds.append((fd, saved))
        finally:
            os.close(out)

    def _restore_output(self) -> None:
        with self._lock:  # type: ignore[union-attr]
            if not self._saved_fds:
                return
            flush_std_streams()
            for fd, saved in self._saved_fds:
                try:
                    os.dup2(saved, fd)
                    os.close(saved)
                except OSError:
                    pass
            self._saved_fds.clear()

    def _note(self, text: str) -> None:
        try:
            os.write(2, (text + "\n").encode("utf-8", "replace"))
        except OSError:
            pass


def attach_live(attachment, label: str, *, deadline: float | None = None):
    """`peakline attach PID --live`: the view over ``attachment`` on this (the attaching
    command's) thread until q, the target's exit or ``deadline``; returns the AttachSource,
    whose ``final`` is the profile (detached) or None (still attached: Ctrl-C or the view
    failed; the caller detaches). The target's output is left alone: it is another process."""
    import signal

    from peakline.live.source import AttachSource

    source = AttachSource(attachment, label, deadline=deadline)

    def on_sigint(signum, frame):
        # The first Ctrl-C ends the view at its next step, never in the middle of a request
        # to the target (the connection would be out of step, and the profile lost); a second
        # one interrupts at once, as usual.
        if source.interrupted:
            raise KeyboardInterrupt
        source.interrupted = True

    tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        LiveView(source, tty, on_quit=source.stop).run()
    finally:
        signal.signal(signal.SIGINT, previous)
        os.close(tty)
    return source
