"""Runs the target program in this process, as ``python script.py`` or ``python -m mod`` would.

Contract: the program runs as ``__main__`` with its own argv, stdin and stdout; its exit status
becomes peakline's; an uncaught exception prints the usual traceback (without peakline's own
frames) and exits 1; Ctrl-C ends it by SIGINT as it would unprofiled. The caller gets an
Outcome back in every case so it can write the profile first, then finish the way the program
would have. A program that never started (no such module, a syntax error) gets the
interpreter's message and status, and nothing else.
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
import threading
import types

from peakline._lean import code_of_file, path_importer

# runpy is imported only to find the code of -m modules, directories and zip archives (a plain
# script is read by _lean.code_of_file: runpy.run_path would import pkgutil and typing into
# the program); their frames are trimmed from tracebacks either way.
_SKIP_FILES = {os.path.abspath(__file__),
               os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lean.py"),
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

    __slots__ = ("exit_code", "exc", "interrupted", "keepalive", "started", "message")

    def __init__(self, exit_code: int, exc: BaseException | None = None,
                 interrupted: bool = False, keepalive: object = None, *,
                 started: bool = True, message: str | None = None) -> None:
        self.exit_code = exit_code
        self.exc = exc                  # uncaught exception (not SystemExit)
        self.interrupted = interrupted  # ended by an uncaught KeyboardInterrupt
        # Keeps the program's globals (or the exception whose traceback references them)
        # alive until the caller has stopped profiling: unprofiled, __main__'s objects live
        # until the interpreter shuts down, so their release must not show up as frees.
        self.keepalive = keepalive
        # False when the program never started: its code could not be found, read or
        # compiled. Then ``message`` (or ``exc``, a SyntaxError) is what the interpreter prints.
        self.started = started
        self.message = message

    def __repr__(self) -> str:
        return (f"Outcome(exit_code={self.exit_code!r}, exc={self.exc!r}, "
                f"interrupted={self.interrupted!r}, started={self.started!r})")

    def release(self) -> None:
        self.keepalive = None


class _NotStarted(Exception):
    """The program's code could not be loaded: what the interpreter prints, and its status."""

    def __init__(self, exit_code: int, message: str | None = None,
                 exc: BaseException | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.exc = exc


def _exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    # sys.exit("message"): Python prints the message to stderr and exits 1.
    print(code, file=sys.stderr)
    return 1


def run(target: Target) -> Outcome:
    """Runs the target to completion, then waits for its non-daemon threads like the
    interpreter does at exit (so their work is profiled too).

    The program gets what ``python script.py`` / ``python DIR`` / ``python -m module`` give
    it: a fresh ``__main__`` module holding the interpreter's set of names (``__builtins__``
    is the builtins module, ``__loader__`` the loader that read the code, ``__annotations__``
    an empty dict), ``sys.argv[0]`` as typed (the module's file for -m) and ``sys.path[0]``
    the script's directory (the directory or archive itself; the current directory for -m).
    A program whose code cannot be found, read or compiled never starts: the Outcome says so.
    """
    saved_argv, saved_path0 = list(sys.argv), sys.path[0] if sys.path else None
    missing = object()
    saved_main = sys.modules.get("__main__", missing)
    module = None
    try:
        # sys.path[0] first: the module (or the directory's __main__) is looked up with it.
        path0 = _path0(target)
        if sys.path:
            sys.path[0] = path0
        else:
            sys.path.insert(0, path0)
        try:
            code, fields, argv0 = _load(target)
        except _NotStarted as failed:
            return Outcome(failed.exit_code, exc=failed.exc, started=False,
                           message=failed.message)
        module = types.ModuleType("__main__")
        namespace = module.__dict__
        namespace["__annotations__"] = {}
        namespace["__builtins__"] = builtins
        namespace.update(fields)
        sys.argv = [argv0, *target.args]
        sys.modules["__main__"] = module
        exec(code, namespace)
        outcome = Outcome(0, keepalive=module)
    except SystemExit as exc:
        outcome = Outcome(_exit_code_of(exc), keepalive=(exc, module))
    except KeyboardInterrupt as exc:
        outcome = Outcome(130, exc=exc, interrupted=True, keepalive=(exc, module))
    except BaseException as exc:  # noqa: BLE001 - the program's own uncaught exception
        outcome = Outcome(1, exc=exc, keepalive=(exc, module))
    finally:
        if module is None:  # never started: nothing of the program to wait for
            _restore(saved_argv, saved_path0, saved_main, missing)
    # __main__ stays the program's while its non-daemon threads finish, as unprofiled.
    _join_non_daemon_threads()
    _restore(saved_argv, saved_path0, saved_main, missing)
    return outcome


def _restore(saved_argv: list[str], saved_path0: str | None, saved_main: object,
             missing: object) -> None:
    sys.argv = saved_argv
    if saved_path0 is not None and sys.path:
        sys.path[0] = saved_path0
    if saved_main is missing:
        sys.modules.pop("__main__", None)
    else:
        sys.modules["__main__"] = saved_main


def _path0(target: Target) -> str:
    """sys.path[0] as the interpreter sets it: the current directory for -m, the directory or
    archive itself, else the script's directory."""
    if target.script is None:
        return os.getcwd()
    path = os.path.abspath(target.script)
    return path if path_importer(path) is not None else os.path.dirname(path)


def _load(target: Target) -> tuple[types.CodeType, dict, str]:
    """(code, the module attributes the interpreter sets, argv[0]) for target, sys.path[0]
    being set; _NotStarted with the interpreter's message and status when there is nothing
    to run."""
    if target.script is None:
        name = target.module or ""
        import runpy
        try:
            _, spec, code = runpy._get_module_details(name, runpy._Error)
        except runpy._Error as error:  # python -m: "<python>: No module named x", status 1
            raise _NotStarted(1, message=f"{sys.executable}: {error}") from None
        except SyntaxError as error:
            raise _NotStarted(1, exc=error) from None
        return code, _spec_fields(spec), spec.origin
    path = os.path.abspath(target.script)
    if path_importer(path) is not None:
        # A directory or zip archive: python runs the __main__ module found in it.
        import runpy
        try:
            _, spec, code = runpy._get_main_module_details(runpy._Error)
        except runpy._Error as error:  # "can't find '__main__' module in 'DIR'"
            raise _NotStarted(1, message=f"{sys.executable}: {error}") from None
        except SyntaxError as error:
            raise _NotStarted(1, exc=error) from None
        return code, _spec_fields(spec), target.script
    try:
        code, compiled = code_of_file(path)
    except OSError as error:  # python: "<python>: can't open file '...': [Errno 2] ...", 2
        raise _NotStarted(2, message=f"{sys.executable}: can't open file {path!r}: "
                                     f"[Errno {error.errno}] {error.strerror}") from None
    except (SyntaxError, ValueError) as error:
        raise _NotStarted(1, exc=error) from None
    from _frozen_importlib_external import SourceFileLoader, SourcelessFileLoader
    loader = (SourcelessFileLoader if compiled else SourceFileLoader)("__main__", path)
    fields = {"__loader__": loader, "__file__": path, "__cached__": None}
    return code, fields, target.script


def _spec_fields(spec) -> dict:
    """What runpy (and so ``python -m`` / ``python DIR``) sets from the module's spec."""
    return {"__file__": spec.origin, "__cached__": spec.cached, "__doc__": None,
            "__loader__": spec.loader, "__package__": spec.parent, "__spec__": spec}


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
    """Prints the traceback of an uncaught exception (or why the program could not start) as
    the interpreter would."""
    if outcome.message is not None:
        try:
            print(outcome.message, file=sys.stderr)
        except (OSError, ValueError, AttributeError):
            pass
        return
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
        flush_std_streams()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(outcome.exit_code)


def flush_std_streams() -> None:
    """Flushes sys.stdout and sys.stderr as the program left them (closed, replaced or set to
    None by the program: skipped)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
