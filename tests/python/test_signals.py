"""The program's own signals, EINTR, os._exit, daemon threads and SIGTERM under peakline."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from peakline_proc import PROGRAMS, run_peakline

SIGNALS = PROGRAMS / "signals_own.py"
EXITS = PROGRAMS / "exits.py"


def test_own_sigalrm_sigprof_sigint_handlers_behave_the_same(tmp_path):
    plain = subprocess.run([sys.executable, str(SIGNALS)], capture_output=True, text=True,
                           timeout=60)
    result = run_peakline([str(SIGNALS)], tmp_path, timeout=60)
    assert plain.returncode == 3
    assert result.returncode == plain.returncode
    assert result.stdout == plain.stdout
    assert "select [] recv timeout alarms>=10 True prof 1 int 1" in result.stdout
    assert result.profile()["exit_code"] == 3


def test_os_exit_with_a_daemon_thread_leaves_a_profile(tmp_path):
    result = run_peakline([str(EXITS), "os_exit"], tmp_path, timeout=60)
    assert result.returncode == 4, result.stderr
    assert result.stdout == "ready\n"
    profile = result.profile()
    assert profile["exit_code"] == 4
    assert str(EXITS) in profile["files"]


def test_daemon_thread_still_running_at_exit(tmp_path):
    result = run_peakline([str(EXITS), "normal"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ready\nend\n"
    assert len(result.profile()["threads"]) >= 2


def test_sigterm_leaves_a_usable_profile_and_dies_by_sigterm(tmp_path):
    out = tmp_path / "term.json"
    proc = subprocess.Popen([sys.executable, "-m", "peakline", "run", "--outfile", str(out),
                             str(EXITS), "sigterm"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    profile = json.loads(out.read_text())
    assert profile["exit_code"] == 128 + signal.SIGTERM
