"""`peakline run` behaves like `python script.py`: argv, stdin/stdout, exit status,
tracebacks, Ctrl-C and SIGTERM — and writes the profile in every one of those cases."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from peakline_proc import run_peakline


def write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def assert_profile_written(res, exit_code):
    profile = res.profile()
    assert profile["format"] == "peakline" and profile["version"] == 1
    assert profile["exit_code"] == exit_code
    return profile


def test_argv_stdin_stdout_and_main_are_the_programs(tmp_path):
    script = write(tmp_path, "echo.py", """
        import sys
        print("argv", sys.argv[1:], __name__)
        for line in sys.stdin:
            print("got", line.strip())
    """)
    res = run_peakline([str(script), "a", "--flag", "-m", "x"], tmp_path, input="one\ntwo\n")
    assert res.returncode == 0, res.stderr
    # The report goes to stderr: stdout is exactly the program's.
    assert res.stdout == "argv ['a', '--flag', '-m', 'x'] __main__\ngot one\ngot two\n"
    assert_profile_written(res, 0)
    assert "profile written to" in res.stderr


# What the program's __main__ holds (the interpreter's own names, argv[0], SIGTERM's handler,
# os._exit) is compared with `python script.py` in test_run_fidelity.py.


def test_sys_exit_status_is_kept(tmp_path):
    script = write(tmp_path, "seven.py", "import sys\nsys.exit(7)\n")
    res = run_peakline([str(script)], tmp_path)
    assert res.returncode == 7
    assert_profile_written(res, 7)


def test_sys_exit_with_message(tmp_path):
    script = write(tmp_path, "msg.py", "import sys\nsys.exit('bad input')\n")
    res = run_peakline([str(script)], tmp_path)
    assert res.returncode == 1
    assert "bad input" in res.stderr


def test_uncaught_exception_prints_the_normal_traceback(tmp_path):
    script = write(tmp_path, "boom.py", """
        def inner():
            raise ValueError("boom")
        inner()
    """)
    res = run_peakline([str(script)], tmp_path)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert res.returncode == 1 == plain.returncode
    assert plain.stderr in res.stderr  # the same traceback, byte for byte
    assert "runpy" not in res.stderr and "peakline/runner.py" not in res.stderr
    assert_profile_written(res, 1)


def test_ctrl_c_ends_the_program_as_unprofiled(tmp_path):
    # The handler is set explicitly: a test run started in the background (`cmd &`) inherits
    # SIGINT ignored, and CPython then installs no KeyboardInterrupt handler at all.
    script = write(tmp_path, "intr.py", """
        import os, signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        x = sum(range(10**6))
        os.kill(os.getpid(), signal.SIGINT)
        import time; time.sleep(5)
    """)
    res = run_peakline([str(script)], tmp_path)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert res.returncode == plain.returncode == -signal.SIGINT
    assert "KeyboardInterrupt" in res.stderr
    assert_profile_written(res, 130)


def test_sigterm_writes_the_profile_and_dies_by_sigterm(tmp_path):
    script = write(tmp_path, "term.py", """
        import time
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """)
    out = tmp_path / "p.json"
    proc = subprocess.Popen([sys.executable, "-m", "peakline", "run", "-o", str(out), str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGTERM
    profile = json.loads(out.read_text())
    assert profile["exit_code"] == 128 + signal.SIGTERM
    lines = profile["files"][str(script)]["lines"]
    assert sum(r["wait_s"] for r in lines) > 0.2


def test_module_mode(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(textwrap.dedent("""
        import sys
        def spin():
            return sum(i * i for i in range(300000))
        if __name__ == "__main__":
            spin()
            print("tool", sys.argv[1:])
            sys.exit(3)
    """))
    res = run_peakline(["-m", "mypkg.tool", "x", "--y"], tmp_path)
    assert res.returncode == 3, res.stderr
    assert res.stdout == "tool ['x', '--y']\n"
    profile = assert_profile_written(res, 3)
    assert str(pkg / "tool.py") in profile["files"]


def test_short_program_still_gets_a_report(tmp_path):
    script = write(tmp_path, "tiny.py", "x = 1\n")
    res = run_peakline([str(script)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "tiny.py" in res.stderr
    profile = assert_profile_written(res, 0)
    assert profile["elapsed_s"] >= 0


def test_default_outfile_name(tmp_path):
    script = write(tmp_path, "named.py", "x = 1\n")
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--no-report", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "peakline-named.json").is_file()


def test_library_time_is_charged_to_the_calling_user_line(tmp_path):
    script = write(tmp_path, "lib.py", """
        import json
        data = [{"k": i, "v": [i] * 10} for i in range(20000)]
        for _ in range(15):
            json.loads(json.dumps(data))  # the hot user line
    """)
    res = run_peakline(["--no-report", str(script)], tmp_path)
    profile = res.profile()
    assert list(profile["files"]) == [str(script)]
    hot = max(profile["files"][str(script)]["lines"],
              key=lambda r: r["cpu_python_s"] + r["cpu_native_s"])
    assert hot["lineno"] == 5

    res_all = run_peakline(["--no-report", "--profile-all", str(script)], tmp_path,
                           outfile="all.json")
    assert any(p.endswith(os.path.join("json", "encoder.py")) for p in res_all.profile()["files"])

    res_excl = run_peakline(["--no-report", "--profile-exclude", "lib.py", str(script)],
                            tmp_path, outfile="excl.json")
    assert str(script) not in res_excl.profile()["files"]

    res_only = run_peakline(["--no-report", "--profile-only", "json/", str(script)],
                            tmp_path, outfile="only.json")
    files = res_only.profile()["files"]
    assert files and all("json" + os.sep in p for p in files)


@pytest.mark.parametrize("args, message", [
    (["missing_script.py"], "no such file"),
    (["--cpu-sampling-rate", "abc", "x.py"], "invalid float value"),
    (["--no-such-option", "x.py"], "unrecognized arguments"),
    ([], "no program to run"),
])
def test_bad_command_lines_fail_clearly(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_version_and_help():
    proc = subprocess.run([sys.executable, "-m", "peakline", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("peakline ")
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for flag in ("--outfile", "--cpu-sampling-rate", "--profile-all", "--profile-only",
                 "--profile-exclude"):
        assert flag in proc.stdout
