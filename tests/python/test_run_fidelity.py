"""`peakline run` leaves the program what the interpreter gives it, and finishes without
changing how it ends: the `__main__` namespace, argv, SIGTERM's handler and os._exit as the
program sees them; its timers after its last statement; programs that never start; the
profile despite exhausted descriptors or a lowered address-space limit; a closed stderr;
unusable output paths and byte sizes found before the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from peakline_proc import run_peakline


def write(tmp_path, name, body):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def plain(args, cwd, **kwargs):
    """The same program run by the interpreter itself."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, **kwargs)


# What a program can read off its own start.
PROBE = """
    import json, os, signal, sys
    g = globals()
    def annotated(x: int): pass
    print(json.dumps({
        "names": list(g),
        "builtins": type(__builtins__).__name__,
        "builtins_print": __builtins__.print is print,
        "loader": type(__loader__).__name__,
        "loader_data": __loader__.get_data(__file__)[:16].hex() if __loader__ else None,
        "package": repr(__package__), "spec": repr(getattr(__spec__, "name", __spec__)),
        "cached": repr(__cached__), "file": __file__, "doc": repr(__doc__),
        "argv0": sys.argv[0], "path0": sys.path[0],
        "main_is_this": sys.modules["__main__"].__dict__ is g,
        "annotations": repr(annotated.__annotations__),
        "sigterm": repr(signal.getsignal(signal.SIGTERM)),
        "os_exit": [repr(os._exit), os._exit.__name__, os._exit.__qualname__,
                    os._exit.__module__, os._exit.__doc__],
    }))
"""


def _compare(tmp_path, args, outfile="p.json"):
    ref = plain(args, tmp_path)
    assert ref.returncode == 0, ref.stderr
    res = run_peakline(["--no-report", *args], tmp_path, outfile=outfile)
    assert res.returncode == 0, res.stderr
    seen, expected = json.loads(res.stdout), json.loads(ref.stdout)
    assert seen == expected
    assert res.profile()["format"] == "peakline"
    return seen


def test_a_script_gets_the_interpreters_main(tmp_path):
    write(tmp_path, "probe.py", PROBE)
    seen = _compare(tmp_path, ["probe.py"])   # relative, as typed
    assert seen["builtins"] == "module" and seen["loader"] == "SourceFileLoader"
    assert seen["argv0"] == "probe.py" and seen["sigterm"] == "<Handlers.SIG_DFL: 0>"
    assert seen["annotations"] == "{'x': <class 'int'>}"   # no future flags of peakline's
    assert seen["os_exit"][0] == "<built-in function _exit>"


def test_a_compiled_script_a_directory_an_archive_and_a_module_too(tmp_path):
    import py_compile
    import zipfile
    source = write(tmp_path, "src/probe.py", PROBE)
    py_compile.compile(str(source), cfile=str(tmp_path / "probe.pyc"), doraise=True)
    write(tmp_path, "app/__main__.py", PROBE)
    with zipfile.ZipFile(tmp_path / "probe.zip", "w") as z:
        z.write(source, "__main__.py")
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/tool.py", PROBE)
    for n, args in enumerate((["probe.pyc"], ["app"], ["probe.zip"], ["-m", "pkg.tool"])):
        seen = _compare(tmp_path, args, outfile=f"p{n}.json")
        assert seen["builtins"] == "module" and seen["main_is_this"] is True, args


def test_os_exit_pickles_as_the_builtin(tmp_path):
    script = write(tmp_path, "pick.py", """
        import os, pickle
        print(pickle.loads(pickle.dumps(os._exit)) is getattr(__import__("posix"), "_exit"))
        os._exit(5)
    """)
    res = run_peakline(["--no-report", str(script)], tmp_path)
    assert (res.returncode, res.stdout) == (5, "True\n"), res.stderr
    assert res.profile()["exit_code"] == 5


def test_a_handler_chaining_to_the_previous_sigterm_handler_runs_its_cleanup(tmp_path):
    script = write(tmp_path, "chain.py", """
        import os, signal, sys, time
        def mine(signum, frame):
            if callable(prev):
                prev(signum, frame)
            print("cleanup done", flush=True)
            sys.exit(0)
        prev = signal.signal(signal.SIGTERM, mine)
        print("prev", repr(prev), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    """)
    ref = plain([str(script)], tmp_path)
    res = run_peakline(["--no-report", str(script)], tmp_path)
    assert (res.returncode, res.stdout) == (ref.returncode, ref.stdout) == \
        (0, "prev <Handlers.SIG_DFL: 0>\ncleanup done\n"), res.stderr
    assert res.profile()["exit_code"] == 0


def test_sigterm_after_the_program_set_sig_dfl_still_writes_the_profile(tmp_path):
    script = write(tmp_path, "dfl.py", """
        import os, signal, time
        print(repr(signal.signal(signal.SIGTERM, signal.SIG_DFL)), flush=True)
        print(repr(signal.getsignal(signal.SIGTERM)), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    """)
    res = run_peakline(["--no-report", str(script)], tmp_path)
    assert res.returncode == -15
    assert res.stdout == "<Handlers.SIG_DFL: 0>\n<Handlers.SIG_DFL: 0>\n"
    assert res.profile()["exit_code"] == 128 + 15


def test_interrupt_main_with_sigterm_at_its_default_does_nothing(tmp_path):
    # _thread.interrupt_main(SIGTERM) trips the Python-level handler without a signal; with
    # SIGTERM at SIG_DFL (never touched, or set again) it does nothing unprofiled, so
    # peakline's hidden handler must not write the profile and kill the process.
    # (CPython's test_threading InterruptMainTests.test_interrupt_main_noerror does this.)
    script = write(tmp_path, "interrupt.py", """
        import _thread, signal, time
        _thread.interrupt_main(signal.SIGTERM)
        time.sleep(0.05)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _thread.interrupt_main(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _thread.interrupt_main(signal.SIGTERM)
        time.sleep(0.05)
        print("survived", flush=True)
    """)
    ref = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60)
    assert (ref.returncode, ref.stdout) == (0, "survived\n"), ref.stderr
    res = run_peakline(["--no-report", str(script)], tmp_path)
    assert (res.returncode, res.stdout) == (0, "survived\n"), res.stderr
    assert res.profile()["exit_code"] == 0


def test_the_programs_timer_does_not_fire_after_its_last_statement(tmp_path):
    # A SIGALRM handler that re-arms a 0.1 s timer each time: unprofiled, the process is gone
    # before the last armed timer expires.
    script = write(tmp_path, "alarm.py", """
        import signal
        iterations = 3
        def handler(signum, frame):
            global iterations
            print("iterations remaining:", iterations, flush=True)
            iterations -= 1
            signal.setitimer(signal.ITIMER_REAL, 0.1)
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        while iterations > 0:
            signal.pause()
        print("done", flush=True)
    """)
    ref = plain([str(script)], tmp_path)
    for mode in ([], ["--cpu-only"]):
        res = run_peakline(["--no-report", *mode, str(script)], tmp_path)
        assert (res.returncode, res.stdout) == (0, ref.stdout), res.stderr
        assert res.stdout.endswith("iterations remaining: 1\ndone\n")
        assert res.profile()["exit_code"] == 0


def test_a_program_that_exhausts_descriptors_still_gets_its_profile(tmp_path):
    script = write(tmp_path, "fds.py", """
        import os
        n = 0
        try:
            while True:
                os.open(os.devnull, os.O_RDONLY); n += 1
        except OSError as e:
            print("stopped:", e.strerror)
        print("program finished normally")
    """)
    ref = plain([str(script)], tmp_path)
    res = run_peakline([str(script)], tmp_path)
    assert (res.returncode, res.stdout) == (0, ref.stdout), res.stderr
    assert "Traceback" not in res.stderr
    assert res.profile()["exit_code"] == 0


def test_peaklines_threads_take_their_address_space_before_the_programs_first_line(tmp_path):
    """glibc reserves a 64 MiB malloc arena for a thread at its first allocation. The tick
    thread's came at some point after the program had started (2 runs in 3 here: VmSize
    100 -> 164 MiB within the program's first 50 ms), which cost a program that caps its
    address space (RLIMIT_AS) that much headroom; the session's start now waits for it. A
    program that allocates nothing must see its address space stay put."""
    script = write(tmp_path, "still.py", """
        import time
        def vm():
            for line in open("/proc/self/status"):
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        first = vm()
        time.sleep(0.3)
        print((vm() - first) // 2**20)
    """)
    for _ in range(3):
        res = run_peakline(["--no-report", str(script)], tmp_path)
        assert res.returncode == 0, res.stderr
        assert int(res.stdout) < 16, res.stdout  # MiB of address space gained while idle


@pytest.mark.parametrize("headroom_mib", [40, 52, 64, 76])
def test_a_program_that_caps_its_address_space_still_gets_its_profile(tmp_path, headroom_mib):
    # How much address space is left when the program ends depends on how its allocations
    # fell (64 MiB left none on this machine before peakline kept a spare); a few caps.
    script = write(tmp_path, "cap.py", """
        import resource
        def vm():
            for line in open("/proc/self/status"):
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        cap = vm() + HEADROOM * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        try:
            big = bytearray(200 * 2**20)
        except MemoryError:
            print("MemoryError for 200 MiB")
        x = [bytearray(1000) for _ in range(20000)]
        print("ok", len(x))
    """.replace("HEADROOM", str(headroom_mib)))
    res = run_peakline([str(script)], tmp_path)
    assert (res.returncode, res.stdout) == (0, "MemoryError for 200 MiB\nok 20000\n"), res.stderr
    assert res.profile()["exit_code"] == 0


def test_no_descriptor_left_at_all_keeps_the_exit_status(tmp_path):
    # A hard limit of 3 descriptors cannot be raised again without CAP_SYS_RESOURCE: then
    # nothing can be written, which peakline says in one line; the status stays the program's.
    script = write(tmp_path, "three.py", """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (3, 3))
        sys.exit(4)
    """)
    res = run_peakline([str(script)], tmp_path)
    assert res.returncode == 4
    assert "Traceback" not in res.stderr
    if not res.profile_path.exists():
        assert "peakline: error: the profile could not be written" in res.stderr


@pytest.mark.parametrize("body", [
    'import os, sys\nprint("hello"); sys.stdout.flush()\nos.close(2)\n'
    'x = [bytearray(1000) for _ in range(1000)]\n',
    'import sys\nsys.stderr.close()\nx = 1\n',
])
def test_closing_stderr_does_not_change_the_exit_status(tmp_path, body):
    script = write(tmp_path, "closer.py", body)
    ref = plain([str(script)], tmp_path)
    res = run_peakline([str(script)], tmp_path)
    assert (res.returncode, res.stdout) == (ref.returncode, ref.stdout) == \
        (0, ref.stdout), res.stderr
    assert "lost sys.stderr" not in res.stderr and "Traceback" not in res.stderr
    assert res.profile()["exit_code"] == 0


@pytest.mark.parametrize("outfile, message", [
    ("missing/dir/p.json", "no such directory"),
    (".", "is a directory"),
    ("/proc/p.json", "cannot create a file in /proc"),
])
def test_an_unusable_outfile_is_refused_before_the_program_runs(tmp_path, outfile, message):
    script = write(tmp_path, "hello.py", 'print("ran")\n')
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--outfile", outfile,
                           str(script)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"peakline: error: --outfile {outfile}: {message}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["hello.py"]


@pytest.mark.parametrize("size", ["1e30", "9223372036854775807", "4294967295T", "2T",
                                  "0.5K", "-5", "0x10"])
def test_absurd_memory_sampling_intervals_are_refused(tmp_path, size):
    script = write(tmp_path, "hello.py", 'print("ran")\n')
    for mode in ([], ["--cpu-only"]):
        proc = subprocess.run([sys.executable, "-m", "peakline", "run", *mode,
                               "--memory-sampling-interval", size, str(script)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert proc.returncode == 2 and proc.stdout == ""
        assert "--memory-sampling-interval" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_the_api_refuses_absurd_memory_sampling_intervals():
    import peakline
    for value in (1e30, 2**63, 512, 2**41, "1M"):
        with pytest.raises(ValueError):
            peakline.start(memory_sampling_interval=value)
    assert not peakline.is_profiling()


def test_html_for_a_script_whose_name_is_not_utf8(tmp_path):
    name = os.fsdecode(b"caf\xe9.py")
    script = tmp_path / name
    script.write_text('print("ok")\n')
    res = run_peakline(["--no-report", "--html", "out.html", name], tmp_path)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "<title>peakline: caf\ufffd.py</title>" in page
    view = subprocess.run([sys.executable, "-m", "peakline", "view", str(res.profile_path),
                           "--html", "again.html"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert view.returncode == 0, view.stderr
    assert "caf\ufffd.py" in (tmp_path / "again.html").read_text(encoding="utf-8")


def test_a_directory_with_main_runs_like_python_dir(tmp_path):
    write(tmp_path, "app/__main__.py", """
        import sys, time
        t = time.process_time()
        while time.process_time() - t < 0.3:
            pass
        print("app", sys.argv[1:])
        sys.exit(3)
    """)
    res = run_peakline(["app", "x"], tmp_path)
    assert (res.returncode, res.stdout) == (3, "app ['x']\n"), res.stderr
    assert str(tmp_path / "app" / "__main__.py") in res.profile()["files"]


@pytest.mark.parametrize("args, files", [
    (["-m", "no_such_module_xyz"], {}),
    (["-m", "pkg"], {"pkg/__init__.py": ""}),
    (["empty_dir"], {"empty_dir/README": "no main here"}),
    (["bad.py"], {"bad.py": "x = 1\ndef (\n"}),
])
def test_a_program_that_never_started_gets_pythons_message_and_nothing_else(tmp_path, args,
                                                                              files):
    for name, text in files.items():
        write(tmp_path, name, text)
    ref = plain(args, tmp_path)
    res = run_peakline(args, tmp_path)
    assert res.returncode == ref.returncode == 1
    assert res.stderr == ref.stderr and res.stdout == ""
    assert not res.profile_path.exists()
    assert "peakline" not in res.stderr


def test_a_binary_file_never_starts(tmp_path):
    binary = tmp_path / "prog"
    shutil.copyfile(sys.executable, binary)
    res = run_peakline(["prog"], tmp_path)
    assert res.returncode == 1
    assert "SyntaxError" in res.stderr and "null bytes" in res.stderr
    assert not res.profile_path.exists()
