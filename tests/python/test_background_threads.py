"""Idle library threads (a Jupyter kernel's IOPub/heartbeat threads, torch's pool) wait all
the time; their waiting is shown apart and is not the denominator of the user's percentages
(Profile.background_wait_by_thread, docs/reports.md "Whose time")."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest

from peakline.model import read_profile
from peakline.reporters import terminal

PROGRAM = textwrap.dedent("""\
    import threading, time
    stop = threading.Event()
    idle = threading.Thread(target=stop.wait, name="idle-pool", daemon=True)
    idle.start()

    def mine():
        time.sleep(0.6)  # MINE: the user's own thread waits in the user's code

    worker = threading.Thread(target=mine, name="mine")
    worker.start()
    end = time.process_time() + 0.6
    while time.process_time() < end:  # BURN
        pass
    worker.join()
    stop.set()
    """)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("background")
    (folder / "app.py").write_text(PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--cpu-only", "--no-report",
                           "-o", "p.json", "app.py"], cwd=folder, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return read_profile(folder / "p.json")


def _thread(profile, name):
    return next(t for t in profile.threads if t.name == name)


def test_a_thread_idle_in_library_code_is_background(profile):
    background = profile.background_wait_by_thread()
    idle, mine, main = (_thread(profile, n) for n in ("idle-pool", "mine", "MainThread"))
    assert idle.tid in background and background[idle.tid] >= 0.5  # waited the whole run
    assert mine.tid not in background  # waited on a line of app.py: the user's
    assert main.tid not in background
    assert profile.user_sampled_s == pytest.approx(profile.sampled_s - background[idle.tid])


def test_background_wait_leaves_the_denominator_and_attribution(profile):
    # Every sample of the user's threads is on a line of app.py; the idle thread's are not.
    assert profile.user_attributed_fraction > 0.9
    assert profile.attributed_fraction < profile.user_attributed_fraction
    lines = {ln.lineno: ln for ln in profile.files[next(iter(profile.files))].lines}
    burn = next(n for n, text in enumerate(PROGRAM.splitlines(), 1) if "# BURN" in text)
    stream = io.StringIO()
    terminal.render(profile, stream, width=200, color=False, reduced=True)
    text = stream.getvalue()
    row = next(r for r in text.splitlines() if "# BURN" in r and "│" in r)
    expected = 100 * lines[burn].total_s / profile.user_sampled_s
    assert f"{expected:.1f}%" in row.split("│")[5]  # the total column
    assert "idle background threads waited" in text and "(not counted)" in text
    listed = next(r for r in text.splitlines() if "1 background thread (" in r)
    assert "idle-pool waited" in listed and "mine" not in listed
