"""Runs the target program in this process, as ``python script.py`` or ``python -m mod`` would.

Contract (issue 2): the program runs as ``__main__`` with its own argv, stdin and stdout; its
exit status becomes peakline's; an uncaught exception prints the usual traceback (without
peakline's own frames) and exits 1; Ctrl-C ends it by SIGINT as it would unprofiled. The
caller gets an Outcome back in every case so it can write the profile first, then finish the
way the program would have.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import types

# runpy is imported only for what this module does not do itself (-m, zip archives); its
# frames are trimmed from tracebacks either way.
_SKIP_FILES = {os.path.abspath(__file__),
               os.path.join(os.path.dirname(os.path.abspath(os.__file__)), "runpy.py")}


class Target:
    """What to run: a script path or a module name (-m), and its arguments."""

    __slots__ = ("script", "module", "args")

    def __init__(self, script: str | None = None, module: str | None = None,
                 args: list[str] | None = None) -> None:
        self.script = script   # path of the script, or
        self.module = module   # name of the module to run with -m
        self.args = list(args) if args is not None else []

    def __repr__(self) -> str:
        return f"Target(script={self.script!r}, module={self.module!r}, args={self.args!r})"

    @property
    def display(self) -> str:
        return self.script if self.script is not None else f"-m {self.module}"


class Outcome:
    """How the program ended."""

    __slots__ = ("exit_code", "exc", "interrupted", "keepalive")

    def __init__(self, exit_code: int, exc: BaseException | None = None,
                 interrupted: bool = False, keepalive: object = None) -> None:
        self.exit_code = exit_code
        self.exc = exc                  # uncaught exception (not SystemExit)
        self.interrupted = interrupted  # ended by an uncaught KeyboardInterrupt
        # Keeps the program's globals (or the exception whose traceback references them)
        # alive until the caller has stopped profiling: unprofiled, __main__'s objects live
        # until the interpreter shuts down, so their release must not show up as frees.
        self.keepalive = keepalive

    def __repr__(self) -> str:
        return (f"Outcome(exit_code={self.exit_code!r}, exc={self.exc!r}, "
                f"interrupted={self.interrupted!r})")

    def release(self) -> None:
        self.keepalive = None


def _exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code & 0xFF
    # sys.exit("message"): Python prints the message to stderr and exits 1.
    print(code, file=sys.stderr)
    return 1


def run(target: Target) -> Outcome:
    """Runs the target to completion, then waits for its non-daemon threads like the
    interpreter does at exit (so their work is profiled too)."""
    saved_argv, saved_path0 = list(sys.argv), sys.path[0] if sys.path else None
    try:
        if target.script is not None:
            sys.argv = [target.script, *target.args]
            script_dir = os.path.dirname(os.path.abspath(target.script))
            if sys.path:
                sys.path[0] = script_dir
            else:
                sys.path.insert(0, script_dir)
            # Like `python script.py` (3.9+): __file__ and co_filename are absolute.
            namespace = run_path_as_main(os.path.abspath(target.script))
        else:
            sys.argv = [target.module or "", *target.args]
            if sys.path:
                sys.path[0] = os.getcwd()
            import runpy
            namespace = runpy.run_module(target.module or "", run_name="__main__",
                                         alter_sys=True)
        outcome = Outcome(0, keepalive=namespace)
    except SystemExit as exc:
        outcome = Outcome(_exit_code_of(exc), keepalive=exc)
    except KeyboardInterrupt as exc:
        outcome = Outcome(130, exc=exc, interrupted=True, keepalive=exc)
    except BaseException as exc:  # noqa: BLE001 - the program's own uncaught exception
        outcome = Outcome(1, exc=exc, keepalive=exc)
    _join_non_daemon_threads()
    sys.argv = saved_argv
    if saved_path0 is not None and sys.path:
        sys.path[0] = saved_path0
    return outcome


def run_path_as_main(path: str) -> dict:
    """``runpy.run_path(path, run_name="__main__")``, done here for a plain file.

    runpy.run_path imports pkgutil, which imports typing: ~0.6 MiB of the profiled process's
    memory, for two small helpers. For a plain file (source or compiled: what no import path
    hook accepts) this does what run_path does, with the same result: a fresh module named
    ``__main__`` is ``sys.modules["__main__"]`` while the code runs, with ``__file__`` = path,
    ``__cached__``, ``__doc__``, ``__loader__`` and ``__spec__`` None, ``__package__`` "";
    ``sys.argv[0]`` is path meanwhile; both are restored afterwards, and a copy of the
    module's namespace is returned. Anything else (a zip archive, a directory) goes to runpy.
    tests/python/test_cli_run.py compares the two.
    """
    if _path_importer(path) is not None:
        import runpy
        return runpy.run_path(path, run_name="__main__")
    code = _code_of_file(path)
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace.update(__name__="__main__", __file__=path, __cached__=None, __doc__=None,
                     __loader__=None, __package__="", __spec__=None)
    missing = object()
    saved_main = sys.modules.get("__main__", missing)
    saved_argv0 = sys.argv[0]
    sys.modules["__main__"] = module
    sys.argv[0] = path
    try:
        exec(code, namespace)
    finally:
        sys.argv[0] = saved_argv0
        if saved_main is missing:
            del sys.modules["__main__"]
        else:
            sys.modules["__main__"] = saved_main
    return namespace.copy()


def _path_importer(path: str):
    """The importer an import path hook gives for path (a zip archive, a directory), or None
    (pkgutil.get_importer's rule)."""
    try:
        return sys.path_importer_cache[path]
    except KeyError:
        pass
    for hook in sys.path_hooks:
        try:
            importer = hook(path)
        except ImportError:
            continue
        sys.path_importer_cache.setdefault(path, importer)
        return importer
    return None


def _code_of_file(path: str) -> types.CodeType:
    """A compiled file (.pyc: magic number, 12 more header bytes, marshalled code) or source."""
    import io
    try:  # the interpreter's own copy of importlib's bootstrap: always loaded
        from _frozen_importlib_external import MAGIC_NUMBER
    except ImportError:
        from importlib.util import MAGIC_NUMBER
    with io.open_code(path) as f:
        if f.read(len(MAGIC_NUMBER)) == MAGIC_NUMBER:
            import marshal
            f.read(12)
            return marshal.load(f)
        f.seek(0)
        return compile(f.read(), path, "exec")


def _join_non_daemon_threads() -> None:
    """What the interpreter does when __main__ ends: threading._shutdown runs the callbacks
    registered with threading._register_atexit (concurrent.futures and joblib/loky stop
    their executors there, which ends their non-daemon manager threads), then joins the
    non-daemon threads. Joining without those callbacks would wait forever for such
    executors. Calling it early is safe: the interpreter's own call at exit returns at once."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        try:
            shutdown()
            return
        except KeyboardInterrupt:
            return
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and not thread.daemon and thread.is_alive():
            try:
                thread.join()
            except KeyboardInterrupt:
                return


def _is_ours(filename: str) -> bool:
    # runpy is frozen in 3.11+: its frames say "<frozen runpy>".
    return filename == "<frozen runpy>" or os.path.abspath(filename) in _SKIP_FILES


def _trim(tb: types.TracebackType | None) -> types.TracebackType | None:
    while tb is not None and _is_ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def report_uncaught(outcome: Outcome) -> None:
    """Prints the traceback of an uncaught exception as the interpreter would."""
    exc = outcome.exc
    if exc is None:
        return
    exc.__traceback__ = _trim(exc.__traceback__)
    sys.excepthook(type(exc), exc, exc.__traceback__)


def finish(outcome: Outcome) -> None:
    """Ends the process the way the unprofiled program would have."""
    if outcome.interrupted:
        # CPython >= 3.8 dies by SIGINT after an uncaught KeyboardInterrupt, so that shells
        # and parents see "killed by SIGINT".
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(outcome.exit_code)


# ---- os._exit -----------------------------------------------------------------------------
# os._exit ends the process at once: no atexit, no finally. multiprocessing's fork children
# always end this way, and programs use it to skip cleanup. While peakline profiles, os._exit
# is wrapped so the callbacks below write the profile first; then the real os._exit runs with
# the same status. Callbacks must be quick and must not raise (errors are swallowed).
_real_os_exit = os._exit
_os_exit_callbacks: list = []


def _os_exit(status):
    for callback in list(_os_exit_callbacks):
        try:
            callback(status)
        except BaseException:  # noqa: BLE001 - the process is ending; never block that
            pass
    _real_os_exit(status)


def on_os_exit(callback) -> None:
    """Calls ``callback(status)`` before the process ends by os._exit (until removed)."""
    if callback not in _os_exit_callbacks:
        _os_exit_callbacks.append(callback)
    if os._exit is not _os_exit:
        os._exit = _os_exit


def remove_os_exit(callback) -> None:
    if callback in _os_exit_callbacks:
        _os_exit_callbacks.remove(callback)
    if not _os_exit_callbacks and os._exit is _os_exit:
        os._exit = _real_os_exit


# ---- os.exec* ------------------------------------------------------------------------------
# An exec replaces the process image: nothing of the old one runs afterwards. While peakline
# profiles, os.execv and os.execve are wrapped (os.execl, execlp, execvp, execle, execlpe and
# execvpe all end in one of them) so the callbacks below write the profile of the part before
# the exec; then the new image starts without peakline's environment (``PEAKLINE_CHILD_*`` and
# the generated sitecustomize's directory on ``PYTHONPATH``): it runs unprofiled, as a
# program exec'd by an unprofiled one would. An exec that fails (OSError) returns to a program
# that now runs unprofiled. Callbacks must be quick and must not raise (errors are swallowed).
_real_execv = os.execv
_real_execve = os.execve
_exec_callbacks: list = []


def _before_exec() -> None:
    for callback in list(_exec_callbacks):
        try:
            callback()
        except BaseException:  # noqa: BLE001 - the exec must go ahead as the program asked
            pass
    from peakline import child
    clean = child.environment_without_peakline(os.environ)
    for key in [k for k in os.environ if k not in clean]:
        del os.environ[key]
    for key, value in clean.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _execv(path, argv):
    _before_exec()
    return _real_execv(path, argv)


def _execve(path, argv, env):
    _before_exec()
    from peakline import child
    return _real_execve(path, argv, child.environment_without_peakline(env))


def on_exec(callback) -> None:
    """Calls ``callback()`` before the process image is replaced by os.exec* (until removed)."""
    if callback not in _exec_callbacks:
        _exec_callbacks.append(callback)
    if os.execv is not _execv:
        os.execv, os.execve = _execv, _execve


def remove_exec(callback) -> None:
    if callback in _exec_callbacks:
        _exec_callbacks.remove(callback)
    if not _exec_callbacks and os.execv is _execv:
        os.execv, os.execve = _real_execv, _real_execve


# ---- uncaught KeyboardInterrupt ------------------------------------------------------------
# CPython >= 3.8 ends by SIGINT after an uncaught KeyboardInterrupt ended __main__, unless a
# string was exec'd or eval'd before the interpreter exits (run_eval_code_obj resets its
# _Py_UnhandledKeyboardInterrupt flag). Building a profile at exit does (dataclasses), so the
# exit paths read the flag first and set it again afterwards.


def unhandled_keyboard_interrupt() -> bool:
    """Whether the interpreter will end by SIGINT: an uncaught KeyboardInterrupt ended
    __main__ and nothing reset the flag since. The interpreter printed that exception, which
    set ``sys.last_exc``/``sys.last_value``; the flag itself is then read where the
    interpreter exports it (CPython 3.8-3.11), else that exception decides."""
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if not isinstance(last, KeyboardInterrupt):
        return False
    try:
        import ctypes
        return bool(ctypes.c_int.in_dll(ctypes.pythonapi,
                                        "_Py_UnhandledKeyboardInterrupt").value)
    except Exception:  # noqa: BLE001 - no ctypes, no such symbol: the exception decides
        return True


def set_unhandled_keyboard_interrupt() -> None:
    """Sets the interpreter's flag again: exec of a string that raises KeyboardInterrupt is
    exactly what sets it (and the exception is caught here)."""
    try:
        exec("raise KeyboardInterrupt")  # noqa: S102 - a constant string
    except KeyboardInterrupt:
        pass


# ---- SIGTERM ------------------------------------------------------------------------------
# Unprofiled, SIGTERM kills at once; profiled, a Python handler writes what was measured and
# then dies by SIGTERM. A Python handler runs only when the main thread next checks for
# signals, and a main thread that blocked right after the signal arrived (a Pool worker going
# back to sem_wait for its next task) would never check: the core re-sends the signal to it
# until the handler reports in (engine/signal_watch.h).


def install_sigterm_handler(handler) -> None:
    """``signal.signal(SIGTERM, handler)``, with the core making sure the handler gets to run.
    ``handler`` must call ``sigterm_handler_started(signum)`` first thing."""
    signal.signal(signal.SIGTERM, handler)
    try:
        from peakline import _core

        _core.watch_signal(signal.SIGTERM)
    except (ImportError, RuntimeError, AttributeError):  # an old core, an odd platform
        pass


def sigterm_handler_started(signum: int) -> None:
    try:
        from peakline import _core

        _core.signal_handled(signum)
    except (ImportError, AttributeError):
        pass
