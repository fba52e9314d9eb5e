"""Free-threaded CPython (3.14t, 3.15t): CPU profiling, and one line saying that memory
profiling is not available there. The build is recognised by the interpreter's own flags."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from peakline.session import FREE_THREADED_MEMORY_MESSAGE, free_threaded_build
from peakline_proc import cpu_s, run_peakline


def test_free_threaded_build_agrees_with_sysconfig_py_gil_disabled():
    assert free_threaded_build() == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_a_free_threaded_build_profiles_cpu_and_says_once_that_memory_is_not_available(
        tmp_path):
    # This interpreter has the GIL: the session is shown the flag a free-threaded build has
    # (sys.abiflags "t"), the only thing it reads to decide; the core then runs CPU-only.
    out = tmp_path / "ft.json"
    program = tmp_path / "busy.py"
    program.write_text(textwrap.dedent("""
        import time
        kept = []
        start = time.process_time()
        while time.process_time() - start < 0.4:
            kept.append([str(i) for i in range(1000)])
    """))
    driver = textwrap.dedent(f"""
        import sys
        sys.abiflags = "t"
        from peakline.cli.main import main
        sys.exit(main(["run", "--no-report", "--outfile", {str(out)!r}, {str(program)!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(FREE_THREADED_MEMORY_MESSAGE) == 1, proc.stderr
    profile = json.loads(out.read_text())
    assert profile["options"]["memory"] is False
    assert "peak_bytes" not in profile and "memory" not in profile
    lines = profile["files"][str(program)]["lines"]
    assert sum(cpu_s(rec) for rec in lines) > 0.2  # of 0.4 s: measured, not just started
    assert all("alloc_native_bytes" not in rec for rec in lines)
    # --cpu-only asked for no memory profiling: nothing to say.
    cpu_only = driver.replace('"--no-report"', '"--cpu-only", "--no-report"')
    proc = subprocess.run([sys.executable, "-c", cpu_only], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert FREE_THREADED_MEMORY_MESSAGE not in proc.stderr, proc.stderr
    assert json.loads(out.read_text())["options"]["memory"] is False


@pytest.mark.skipif(not free_threaded_build(), reason="needs a free-threaded CPython (3.14t)")
def test_on_a_free_threaded_build_the_gil_stays_off_and_each_thread_gets_its_own_cpu(tmp_path):
    # Under the profiler, with its core loaded, the program still runs without the GIL (the
    # core declares it needs none), and each of its threads, running side by side, is charged
    # the CPU time it measured itself (time.thread_time).
    program = tmp_path / "parallel.py"
    truth_file = tmp_path / "truth.json"
    program.write_text(textwrap.dedent("""
        import json, sys, threading, time
        truth = {}
        def burn(name, n):
            t0 = time.thread_time()
            x = 0
            for i in range(n):
                x += i & 3
            truth[name] = time.thread_time() - t0
        def big(): burn("big", 6_000_000)
        def small(): burn("small", 3_000_000)
        threads = [threading.Thread(target=big, name="big"),
                   threading.Thread(target=small, name="small")]
        for t in threads: t.start()
        for t in threads: t.join()
        truth["gil"] = sys._is_gil_enabled()
        truth["core"] = "peakline._core" in sys.modules
        json.dump(truth, open(sys.argv[1], "w"))
    """))
    res = run_peakline(["--no-report", str(program), str(truth_file)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "GIL" not in res.stderr, res.stderr   # no "the GIL has been enabled" warning
    truth = json.loads(truth_file.read_text())
    assert truth["core"] is True and truth["gil"] is False, truth
    threads = {t["name"]: t for t in res.profile()["threads"]}
    for name in ("big", "small"):
        # A thread's CPU beyond its work (starting, ending) is well under a millisecond; one
        # interval (10 ms) may go unseen after its last sample, two on a loaded machine; + 5%.
        measured = threads[name]["cpu_s"]
        assert measured == pytest.approx(truth[name], abs=0.02 + 0.05 * truth[name]), (
            name, measured, truth)
