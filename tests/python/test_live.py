"""The live view (`peakline run --live`), read through a real terminal: tmux runs peakline in
a pseudo-terminal of a known size, ``capture-pane`` reads the screen as the user sees it, and
``send-keys`` presses the keys. Spec: docs/long-running.md, "Live view"."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from peakline.model.profile_file import read_profile
from peakline_proc import marked_lines

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (scripts/test.sh "
                                                            "installs it)"),
]
pytest.importorskip("rich")

# A calibration program: one line takes nearly all the CPU; it runs until the test creates
# the file argv[1] (or for 5 minutes at most: a test run killed half-way must not leave it
# spinning), prints on its way in and out, and ends with status 3.
CALIBRATION = textwrap.dedent("""\
    import os, sys, time
    def spin(n):
        s = 0
        for i in range(n):
            s += i * i  # LINE hot
        return s
    print("started", flush=True)
    rounds, give_up = 0, time.monotonic() + 300
    while not os.path.exists(sys.argv[1]) and time.monotonic() < give_up:
        spin(20_000)
        rounds += 1
    print("finished", rounds, flush=True)
    sys.exit(3)
""")


class Tmux:
    """One private tmux server (its own socket), killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.socket = str(tmp_path / "tmux.sock")

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout

    def start(self, command: str, width: int = 120, height: int = 40) -> None:
        self("-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y", str(height),
             command)

    def screen(self, history: bool = False) -> str:
        """The visible screen; with ``history``, the lines scrolled off above it too."""
        return self("capture-pane", "-p", *(["-S", "-500"] if history else []))

    def wait_for(self, predicate, timeout: float, what: str, *, history: bool = False) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(history)
            if predicate(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{what} not on the screen within {timeout} s:\n{screen}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True,
                       timeout=30)


@pytest.fixture
def tmux(tmp_path):
    server = Tmux(tmp_path)
    yield server
    server.kill()


def _hot_row(screen: str) -> str | None:
    """The first data row of the "Hottest lines by CPU" table."""
    lines = screen.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Hottest lines by CPU"):
            for row in lines[i + 1:]:
                if "│" in row:
                    return row
    return None


def test_live_view_shows_the_hot_line_and_quitting_leaves_the_program_running(tmp_path, tmux):
    script = tmp_path / "calib.py"
    script.write_text(CALIBRATION)
    hot = marked_lines(script)["hot"]
    profile, stop, status = tmp_path / "p.json", tmp_path / "stop", tmp_path / "status"
    command = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "peakline", "run", "--live", "--outfile", str(profile),
        str(script), str(stop)])
    tmux.start(f"cd {shlex.quote(str(tmp_path))} && {command}; echo $? > {status}; sleep 60")
    started = time.monotonic()

    # The view: the known hot line tops the CPU table, its source text beside it.
    # One whole frame: a capture can catch the view half-way through a redraw.
    screen = tmux.wait_for(lambda s: (_hot_row(s) or "").startswith(f"calib.py:{hot} ")
                           and "CPU by thread" in s and "MainThread" in s, 40,
                           f"calib.py:{hot} as the hottest line, with the thread table")
    assert "s += i * i" in _hot_row(screen)
    assert "peakline live" in screen and "memory" in screen and "CPU by thread" in screen
    assert "MainThread" in screen
    # The program's output goes to a file meanwhile. Its printed form only: the view may show
    # the source line `print("started", ...)` itself when that line is among the hot ones.
    assert "started" not in [line.strip() for line in screen.splitlines()]

    # Another view: threads only. The view reads keys between two refreshes, each of which
    # builds a profile: on a loaded machine (CI) that can take longer than a wait of 10 s,
    # so the key is sent again (choosing the view it is already on changes nothing).
    for attempt in range(3):
        tmux("send-keys", "t")
        try:
            tmux.wait_for(lambda s: "CPU by thread" in s and "Hottest lines" not in s, 10,
                          "the threads view")
            break
        except AssertionError:
            if attempt == 2:
                raise

    tmux("send-keys", "q")                  # quit the view: profiling stops, the program not
    tmux.wait_for(lambda s: "live view closed" in s, 15, "the closing note", history=True)
    # The view takes the key between two refreshes (each builds a profile): on a loaded
    # machine that is seconds after it was sent. Profiling has stopped by the closing note.
    closed_at = time.monotonic() - started
    time.sleep(1.0)
    assert not status.exists(), "the program ended with the view"
    stop.write_text("")                                 # now the program may end
    deadline = time.monotonic() + 60
    while not status.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status.read_text().strip() == "3"            # its exit status is peakline's
    screen = tmux.wait_for(lambda s: "finished" in s, 10, "the program's last line",
                           history=True)
    rounds = int(screen.split("finished", 1)[1].split()[0])
    assert rounds > 0                                   # its output is back on the terminal
    out = (tmp_path / "p.out").read_text()              # and what it printed under the view
    assert out.startswith("started") and "finished" not in out

    final = read_profile(profile)
    assert final.exit_code == 3 and final.snapshot is None
    # Profiling stopped at the quit, not at the end of the program (a second or more later).
    assert final.elapsed_s < closed_at + 0.5
    lines = {line.lineno: line for line in final.files[str(script)].lines}
    assert lines[hot].cpu_s > 0.3 * final.totals.cpu_s


def test_live_view_closes_when_the_program_ends(tmp_path, tmux):
    script = tmp_path / "calib.py"
    script.write_text(CALIBRATION)
    profile, stop, status = tmp_path / "p.json", tmp_path / "stop", tmp_path / "status"
    command = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "peakline", "run", "--live", "--outfile", str(profile),
        str(script), str(stop)])
    tmux.start(f"cd {shlex.quote(str(tmp_path))} && {command}; echo $? > {status}; sleep 60")
    tmux.wait_for(lambda s: _hot_row(s) is not None, 40, "the CPU table")
    stop.write_text("")
    screen = tmux.wait_for(lambda s: "profile written to" in s, 40, "the end of the run",
                           history=True)
    # The view is gone (the alternate screen left), the report and the program's note follow.
    assert "peakline live" not in screen
    assert "output while the live view was shown is in" in screen
    deadline = time.monotonic() + 30
    while not status.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status.read_text().strip() == "3"
    final = read_profile(profile)
    assert final.exit_code == 3 and final.snapshot is None
    assert "finished" in (tmp_path / "p.out").read_text()


def test_snapshot_file_source_reads_a_file_when_it_changes(tmp_path, build, make_meta):
    # The source `peakline attach PID --live` can use: another process's snapshot files.
    from peakline.live.source import SnapshotFileSource
    from peakline.model.profile_file import write_profile

    path = tmp_path / "snap.json"
    stopped = []
    source = SnapshotFileSource(str(path), "pid 1", on_stop=lambda: stopped.append(True))
    assert source.poll() is None and source.running            # no file yet
    first = build([("app.py", "f", 1, 2)], [(1, (0,), 5_000_000, 0, 0, 0, 1, 0)],
                  meta=make_meta(elapsed_s=1.0))
    write_profile(first, path)
    assert source.poll().elapsed_s == 1.0
    assert source.poll() is None                                # unchanged: nothing new
    write_profile(build([("app.py", "f", 1, 2)], [(1, (0,), 9_000_000, 0, 0, 0, 2, 0)],
                        meta=make_meta(elapsed_s=2.0)), path)   # atomic rename: a new file
    assert source.poll().elapsed_s == 2.0
    source.stop()
    source.stop()
    assert stopped == [True] and not source.running


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="attach is implemented for x86-64")
@pytest.mark.parametrize("key", ["q", "C-c"])
def test_attach_live_shows_the_target_and_quitting_detaches_and_writes_the_profile(tmp_path,
                                                                                   tmux, key):
    # `peakline attach PID --live`: the same view over another process; q (or Ctrl-C)
    # detaches, the profile is written as a plain attach writes it, the target runs on.
    program = Path(__file__).resolve().parents[1] / "programs" / "attach_target.py"
    hot = next(n for n, line in enumerate(program.read_text().splitlines(), 1)
               if "# the hot line" in line)
    output = tmp_path / "target.out"
    with open(output, "w") as out:
        target = subprocess.Popen([sys.executable, str(program), "steady", "60", "4"],
                                  stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "ATTACH_TARGET_ANY_TRACER": "1"})
    try:
        deadline = time.monotonic() + 20
        while "progress" not in output.read_text():
            assert time.monotonic() < deadline and target.poll() is None
            time.sleep(0.05)
        profile, status = tmp_path / "p.json", tmp_path / "status"
        command = " ".join(shlex.quote(a) for a in [
            sys.executable, "-m", "peakline", "attach", str(target.pid), "--live", "--outfile",
            str(profile)])
        tmux.start(f"{command}; echo $? > {status}; sleep 60")
        screen = tmux.wait_for(
            lambda s: f"attach_target.py:{hot} " in (_hot_row(s) or ""), 30,
            f"attach_target.py:{hot} as the hottest line")
        assert "peakline live" in screen and f"pid {target.pid}" in screen
        # the target's output is not ours to show (its print line's source may be: it is hot)
        assert not re.search(r"progress \d+ \d+\.\d{3}", screen), screen
        tmux("send-keys", key)
        tmux.wait_for(lambda s: "profile written to" in s, 20, "the detach", history=True)
        deadline = time.monotonic() + 10
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status.read_text().strip() == "0"
        final = read_profile(profile)
        assert final.attached["process_exited"] is False and final.pid == target.pid
        lines = {line.lineno: line for line in final.files[str(program)].lines}
        assert lines[hot].cpu_s > 0.3 * final.totals.cpu_s
        # The target runs on, its output still going where it went, and ends as it would.
        printed = output.read_text().count("progress")
        deadline = time.monotonic() + 10
        while output.read_text().count("progress") <= printed:
            assert time.monotonic() < deadline and target.poll() is None, "target stopped"
            time.sleep(0.1)
        target.terminate()
        assert target.wait(30) == 4
        assert output.read_text().splitlines()[-1].startswith("done ")
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
