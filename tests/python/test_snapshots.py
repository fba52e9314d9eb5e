"""Snapshots of a running program (`peakline run --snapshot-every`, the snapshot signal):
read while the program runs, every read is a whole profile, times and totals advance, the
final profile matches a run without snapshots; SIGUSR2 on demand, and a program's own SIGUSR2
handler keeps working as if unprofiled. Spec: docs/long-running.md, docs/profile-format.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from peakline.model.profile import Profile
from peakline.model.profile_file import read_profile
from peakline_proc import marked_lines, run_peakline

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

# A fixed amount of work (not a fixed time), so that two runs are comparable under any load:
# 30 rounds of a pure-Python loop and 2 MiB kept per round.
STEADY = textwrap.dedent("""\
    import sys, time
    def burn(n):
        s = 0
        for i in range(n):
            s += i * i  # LINE hot
        return s
    keep = []
    for _ in range(30):
        burn(300_000)
        keep.append(bytearray(2 << 20))  # LINE keep
        time.sleep(0.05)
    print("done", len(keep))
""")


def _start(tmp_path: Path, program: str, *args: str, name: str = "prog.py"):
    script = tmp_path / name
    script.write_text(program)
    out = tmp_path / "profile.json"
    proc = subprocess.Popen([sys.executable, "-m", "peakline", "run", "--outfile", str(out),
                             "--no-report", *args, str(script)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    return proc, script, out


def _burn_share(profile: Profile, script: Path, hot: int) -> float:
    """The share of CPU in burn()'s loop (the hot line and its for line: how the two split
    varies from run to run, their sum does not)."""
    lines = {line.lineno: line for line in profile.files[str(script)].lines}
    return (lines[hot].cpu_s + lines[hot - 1].cpu_s) / profile.totals.cpu_s


def test_snapshots_while_the_program_runs(tmp_path):
    proc, script, out = _start(tmp_path, STEADY, "--snapshot-every", "0.25")
    marks = marked_lines(script)
    seen: dict[int, Profile] = {}
    try:
        while proc.poll() is None:
            if out.exists():
                # Every read is a whole, valid profile: the writer renames a finished file.
                profile = read_profile(out)
                if profile.snapshot is not None:
                    seen.setdefault(profile.snapshot.sequence, profile)
            time.sleep(0.03)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert stdout.strip() == "done 30"
    assert len(seen) >= 3, f"only {len(seen)} snapshots read while the program ran"
    ordered = [seen[k] for k in sorted(seen)]
    for before, after in zip(ordered, ordered[1:]):
        assert after.snapshot.end_s > before.snapshot.end_s          # times advance
        assert after.elapsed_s == after.snapshot.end_s
        assert after.totals.cpu_s >= before.totals.cpu_s             # totals never go back
        assert after.sampling.cpu_samples >= before.sampling.cpu_samples
    first, last = ordered[0], ordered[-1]
    assert last.totals.cpu_s > first.totals.cpu_s                    # ... and grow
    assert (last.peak_bytes or 0) > (first.peak_bytes or 0)
    for snap in ordered:
        assert snap.exit_code is None and snap.snapshot.trigger == "interval"
        assert snap.snapshot.start_s == 0.0
    final = read_profile(out)
    assert final.snapshot is None and final.exit_code == 0
    assert final.elapsed_s >= last.elapsed_s
    assert final.totals.cpu_s >= last.totals.cpu_s

    # The same program without snapshots: the final figures agree within what two runs of
    # the same work differ by (CPU time under a loaded machine; the sampled peak). burn()'s share
    # varied from 0.82 to 0.96 between plain runs on the loaded 2-core machine, hence 0.15.
    plain = run_peakline(["--no-report", "--snapshot-signal", "none", str(script)], tmp_path,
                         outfile="plain.json")
    assert plain.returncode == 0, plain.stderr
    reference = read_profile(plain.profile_path)
    assert final.totals.cpu_s == pytest.approx(reference.totals.cpu_s, rel=0.35)
    assert _burn_share(final, script, marks["hot"]) == pytest.approx(
        _burn_share(reference, script, marks["hot"]), abs=0.15)
    assert final.peak_bytes == pytest.approx(reference.peak_bytes, rel=0.15)
    keep_final = {line.lineno: line for line in final.files[str(script)].lines}[marks["keep"]]
    assert keep_final.net_bytes == pytest.approx(60 << 20, rel=0.2)  # sampled: an estimate
    # peakline's own snapshot thread is not one of the program's threads.
    assert {t.name for t in final.threads if t.python} == \
        {t.name for t in reference.threads if t.python}


ON_DEMAND = textwrap.dedent("""\
    import sys, time
    print("ready", flush=True)
    s = 0
    deadline = time.time() + float(sys.argv[1])
    while time.time() < deadline:
        s += 1  # LINE spin
    print("done", flush=True)
""")


@pytest.mark.parametrize("signal_option", ["SIGUSR2", "SIGUSR1"])
def test_snapshot_signal_on_demand(tmp_path, signal_option):
    script = tmp_path / "prog.py"
    script.write_text(ON_DEMAND)
    out = tmp_path / "profile.json"
    extra = ["--snapshot-signal", signal_option]
    signum = getattr(signal, signal_option)
    proc = subprocess.Popen([sys.executable, "-m", "peakline", "run", "--outfile", str(out),
                             "--no-report", *extra, str(script), "3"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        assert not out.exists()          # no interval: nothing written until asked
        proc.send_signal(signum)
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        snap = read_profile(out)
        rest, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert snap.snapshot is not None and snap.snapshot.trigger == "signal"
    assert snap.snapshot.sequence == 1 and snap.exit_code is None
    assert snap.totals.cpu_s > 0
    assert proc.returncode == 0, stderr
    assert rest.strip() == "done"
    assert read_profile(out).snapshot is None


def _killed_by_sigusr2(command: list[str], cwd) -> int:
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGUSR2)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode


@pytest.mark.parametrize("extra", [[], ["--snapshot-signal", "none"]])
def test_sigusr2_stays_the_programs_without_snapshots(tmp_path, extra):
    # Unprofiled, SIGUSR2 without a handler ends the program. A plain `peakline run` (no
    # --snapshot-every, --live or --snapshot-signal) leaves it so, and so does
    # --snapshot-signal none; nothing is written by the signal.
    script = tmp_path / "prog.py"
    script.write_text(ON_DEMAND)
    unprofiled = _killed_by_sigusr2([sys.executable, str(script), "20"], tmp_path)
    out = tmp_path / "p.json"
    profiled = _killed_by_sigusr2([sys.executable, "-m", "peakline", "run", "--outfile",
                                   str(out), "--no-report", *extra, str(script), "20"], tmp_path)
    assert unprofiled == profiled == -signal.SIGUSR2
    assert not out.exists()


OWN_HANDLER = textwrap.dedent("""\
    import json, os, signal, sys, time
    got = []
    def mine(signum, frame):
        got.append(signum)
    before = signal.getsignal(signal.SIGUSR2)
    previous = signal.signal(signal.SIGUSR2, mine)
    now = signal.getsignal(signal.SIGUSR2)
    for _ in range(3):
        os.kill(os.getpid(), signal.SIGUSR2)
        t = time.time()
        while time.time() - t < 0.2:
            pass
    # The snapshot the signals asked for, read by the program itself before it ends.
    path, trigger = sys.argv[1], None
    deadline = time.time() + float(sys.argv[2])
    while trigger is None and time.time() < deadline:
        try:
            with open(path) as f:
                trigger = json.load(f)["snapshot"]["trigger"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.02)
    restored = signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    print(json.dumps({"before": int(before), "previous": int(previous), "now_is_mine": now is mine,
                      "got": len(got), "restored_is_mine": restored is mine,
                      "after": int(signal.getsignal(signal.SIGUSR2)), "trigger": trigger}))
    sys.exit(7)
""")


@pytest.mark.parametrize("extra", [["--snapshot-signal", "SIGUSR2"], []])
def test_program_with_its_own_sigusr2_handler(tmp_path, extra):
    # With the snapshot signal asked for, the program's handler is chained behind peakline's;
    # without (a plain run), the signal is the program's alone and asks for no snapshot.
    script = tmp_path / "own.py"
    script.write_text(OWN_HANDLER)
    out = tmp_path / "profile.json"
    unprofiled = subprocess.run([sys.executable, str(script), str(tmp_path / "none.json"), "0.2"],
                                capture_output=True, text=True, timeout=60, cwd=tmp_path)
    profiled = subprocess.run([sys.executable, "-m", "peakline", "run", "--outfile", str(out),
                               "--no-report", *extra, str(script), str(out),
                               "30" if extra else "0.5"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert unprofiled.returncode == profiled.returncode == 7, profiled.stderr
    plain = json.loads(unprofiled.stdout)
    seen = json.loads(profiled.stdout)
    assert plain["trigger"] is None and seen["trigger"] == ("signal" if extra else None)
    del plain["trigger"], seen["trigger"]
    # What the program sees of its signal is what it sees unprofiled; its handler ran 3 times.
    assert seen == plain == {"before": 0, "previous": 0, "now_is_mine": True, "got": 3,
                             "restored_is_mine": True, "after": 0}
    assert read_profile(out).exit_code == 7


@pytest.mark.parametrize("args, words", [
    (["--snapshot-every", "0"], "--snapshot-every"),
    (["--snapshot-every", "soon"], "--snapshot-every"),
    (["--snapshot-signal", "SIGKILL"], "--snapshot-signal"),
    (["--snapshot-signal", "SIGRTMAX"], "real-time"),
    (["--snapshot-signal", "NOPE"], "unknown signal"),
    (["--live-output", "x.out"], "--live-output needs --live")])
def test_snapshot_options_are_checked(tmp_path, args, words):
    from peakline.cli import run
    from peakline.errors import UsageError

    script = tmp_path / "p.py"
    script.write_text("pass\n")
    with pytest.raises(UsageError, match=words):
        run.main([*args, "--outfile", str(tmp_path / "p.json"), str(script)])
    assert not (tmp_path / "p.json").exists()


def _synthetic(build, make_meta) -> Profile:
    return build([("app.py", "f", 1, 2)], [(1, (0,), 5_000_000, 0, 0, 0, 1, 0)],
                 meta=make_meta(exit_code=None))


def test_snapshot_field_round_trip_and_checks(build, make_meta):
    profile = _synthetic(build, make_meta)
    doc = profile.to_dict()
    doc["snapshot"] = {"sequence": 2, "trigger": "interval", "start_s": 0.0, "end_s": 2.5,
                       "taken_at": "2024-05-01T12:00:02.5Z"}
    again = Profile.from_dict(json.loads(json.dumps(doc)))
    assert again.snapshot.sequence == 2 and again.to_dict()["snapshot"] == doc["snapshot"]
    from peakline.errors import ProfileFormatError

    for bad in ({"trigger": "cron"}, {"end_s": -1.0}, {"sequence": -1}):
        broken = json.loads(json.dumps(doc))
        broken["snapshot"].update(bad)
        with pytest.raises(ProfileFormatError, match="snapshot"):
            Profile.from_dict(broken)


def test_view_names_the_range(tmp_path, build, make_meta):
    profile = _synthetic(build, make_meta)
    doc = profile.to_dict()
    doc["snapshot"] = {"sequence": 4, "trigger": "signal", "start_s": 0.0, "end_s": 2.5,
                       "taken_at": "2024-05-01T12:00:02.5Z"}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    shown = subprocess.run([sys.executable, "-m", "peakline", "view", str(path)],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "NO_COLOR": "1"})
    assert shown.returncode == 0, shown.stderr
    assert "snapshot #4 (signal) of a running program: covers 0.00-2.50 s" in shown.stdout


EXCLUDED = textwrap.dedent("""\
    import _thread, json, time
    from peakline.session import Session, exclude_current_thread, own_thread_ending
    ready, go, done = (_thread.allocate_lock() for _ in range(3))
    for lock in (ready, go, done):
        lock.acquire()
    tid = []
    def own():   # a thread of peakline's own: burns 0.6 s of CPU, none of it measured
        exclude_current_thread()
        tid.append(_thread.get_native_id())
        ready.release()
        go.acquire()
        t = time.thread_time()
        while time.thread_time() - t < 0.6:
            pass
        own_thread_ending()
        done.release()
    _thread.start_new_thread(own, ())
    ready.acquire()
    session = Session()
    session.start()
    go.release()
    t = time.thread_time()
    while time.thread_time() - t < 0.3:   # the program's own 0.3 s
        pass
    done.acquire()
    snap = session.snapshot()
    session.stop()
    final = session.profile()
    print(json.dumps({"own_tid": tid[0], "tids": [t.tid for t in final.threads],
                      "cpu_s": final.totals.cpu_s, "snap_cpu_s": snap.totals.cpu_s,
                      "process_cpu_s": final.sampling.process_cpu_s,
                      "warning": final.sampling.warning,
                      "sequence": snap.snapshot.sequence}))
""")


def test_a_thread_of_peaklines_own_is_not_measured(tmp_path):
    script = tmp_path / "excluded.py"
    script.write_text(EXCLUDED)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["own_tid"] not in seen["tids"]
    # The main thread's 0.3 s (and interpreter upkeep), not the excluded thread's 0.6 s.
    assert 0.2 < seen["cpu_s"] < 0.55
    assert 0.2 < seen["snap_cpu_s"] <= seen["cpu_s"] and seen["sequence"] == 1
    # Its CPU is not the process's in the sampling check either: no "incomplete" warning.
    assert seen["process_cpu_s"] < 0.55 and seen["warning"] is None, seen


def test_a_program_that_dies_of_a_fault_keeps_its_last_snapshot(tmp_path):
    # A native library's SIGSEGV kills the process at once, as unprofiled: no profile is
    # written at the end, but the last snapshot stays (docs/reports.md).
    script = tmp_path / "faults.py"
    script.write_text(textwrap.dedent("""\
        import ctypes, time
        block = bytearray(50 << 20)  # LINE block
        start = time.process_time()
        while time.process_time() - start < 1.0:  # LINE burn
            pass
        print("faulting", flush=True)
        time.sleep(0.6)  # a snapshot after the work, before the fault
        ctypes.string_at(0)
    """))
    marks = marked_lines(script)
    result = run_peakline(["--no-report", "--snapshot-every", "0.2", str(script)], tmp_path,
                          expect_fault=True)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=60)
    assert result.returncode == plain.returncode == -signal.SIGSEGV, result.stderr
    assert result.stdout == plain.stdout == "faulting\n"
    profile = read_profile(result.profile_path)
    assert profile.snapshot is not None and profile.exit_code is None
    lines = {line.lineno: line for line in profile.files[str(script)].lines}
    assert profile.peak_bytes >= 50 << 20
    assert lines[marks["block"]].live_at_peak_bytes >= 50 << 20
    assert lines[marks["burn"]].cpu_s >= 0.8
