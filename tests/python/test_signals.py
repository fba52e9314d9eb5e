"""The program's own signals, EINTR, os._exit, daemon threads and SIGTERM under peakline."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

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


# --- peakline's own CPU sampling signal (tests/programs/sampling_signal.py) -----------------

SAMPLING_SIGNAL = PROGRAMS / "sampling_signal.py"


def _burn_line_cpu_s(profile: dict) -> float:
    """CPU of the burning loop: its `while` line and the `n += 1` line below it (how samples
    split between the two varies: 3-11% land on the second)."""
    from peakline_proc import cpu_s, marked_lines

    burn = marked_lines(SAMPLING_SIGNAL)["burn"]
    return sum(cpu_s(r) for r in profile["files"][str(SAMPLING_SIGNAL)]["lines"]
               if r["lineno"] in (burn, burn + 1))


def _run_sampling_signal(tmp_path, mode: str, *extra: str):
    plain = subprocess.run([sys.executable, str(SAMPLING_SIGNAL), mode], capture_output=True,
                           text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    result = run_peakline([*extra, "--no-report", str(SAMPLING_SIGNAL), mode], tmp_path,
                          timeout=120)
    assert result.returncode == plain.returncode, result.stderr
    return plain, result


def _check_cpu_sampled(result) -> None:
    # The program measured its own CPU time (1 s of burning): peakline's figure must match it.
    used = float(result.stdout.splitlines()[0].split()[1])
    profile = result.profile()
    assert _burn_line_cpu_s(profile) == pytest.approx(used, rel=0.1, abs=0.05)
    sampling = profile["sampling"]
    assert signal.SIGRTMIN <= sampling["signal"] <= signal.SIGRTMAX
    assert "warning" not in sampling, sampling
    assert "peakline: warning" not in result.stderr


@pytest.mark.parametrize("extra", [(), ("--cpu-only",)], ids=["full", "cpu_only"])
def test_resetting_every_signal_keeps_sampling_and_sigaction_reports_the_reset(tmp_path, extra):
    plain, result = _run_sampling_signal(tmp_path, "reset", *extra)
    assert result.stdout.splitlines()[1:] == plain.stdout.splitlines()[1:] == ["all SIG_DFL True"]
    _check_cpu_sampled(result)


def test_a_catch_all_handler_receives_no_sampling_tick(tmp_path):
    plain, result = _run_sampling_signal(tmp_path, "catchall")
    assert result.stdout.splitlines()[1:] == plain.stdout.splitlines()[1:] == ["arrived {}"]
    _check_cpu_sampled(result)


def test_a_handler_on_the_sampling_signal_gets_its_own_signals_and_no_tick(tmp_path):
    # The program handles every real-time signal, peakline's included, and sends each to
    # itself once: each arrives exactly once, no tick reaches the program, CPU is measured.
    plain, result = _run_sampling_signal(tmp_path, "realtime")
    assert plain.stdout.splitlines()[1].startswith("each once True")
    assert result.stdout.splitlines()[1].startswith("each once True"), result.stdout
    _check_cpu_sampled(result)


def test_sampling_that_stops_working_is_reported(tmp_path):
    # The program blocks every signal in its only thread, so no tick arrives while it burns
    # 1.5 s of CPU: one line on stderr and the profile's sampling.warning say so.
    result = run_peakline(["--no-report", str(SAMPLING_SIGNAL), "blockall"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    used = float(result.stdout.split()[1])
    sampling = result.profile()["sampling"]
    assert sampling["process_cpu_s"] >= used
    assert "CPU sampling covered only" in sampling["warning"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("peakline: warning")]
    assert warnings == [f"peakline: warning: {sampling['warning']}"]
