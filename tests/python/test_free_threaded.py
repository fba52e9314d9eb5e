"""Free-threaded CPython (3.14t, 3.15t): CPU profiling, and one line saying that memory
profiling is not available there. The build is recognised by the interpreter's own flags."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap

from peakline.session import FREE_THREADED_MEMORY_MESSAGE, free_threaded_build
from peakline_proc import cpu_s


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
