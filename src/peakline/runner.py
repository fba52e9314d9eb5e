"""Runs the target program in this process, as ``python script.py`` or ``python -m mod`` would.

Contract: the program runs as ``__main__`` with its own argv, stdin and stdout; its exit status
becomes peakline's; an uncaught exception prints the usual traceback (without peakline's own
frames) and exits 1; Ctrl-C ends it by SIGINT as it would unprofiled. The caller gets an
Outcome back in every case so it can write the profile first, then finish the way the program
would have. A program that never started (no such module, a syntax error) gets the
interpreter's message and status, and nothing else.
"""

from __future__ import annotations

import _thread
import builtins
import os
import signal
import sys
import threading
import types

# runpy is imported only to find the code of -m modules, directories and zip archives (a plain
# script is read here: runpy.run_path would import pkgutil and typing into the program); its
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
        return code & 0xFF if code >= 0 else code & 0xFF
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
    return path if _path_importer(path) is not None else os.path.dirname(path)


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
    if _path_importer(path) is not None:
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
        code, compiled = _code_of_file(path)
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


def _code_of_file(path: str) -> tuple[types.CodeType, bool]:
    """(code, compiled?) of a compiled file (.pyc: magic number, 12 more header bytes,
    marshalled code) or of source. Source is compiled as the interpreter compiles a script:
    without inheriting this module's ``from __future__`` flags."""
    import io
    try:  # the interpreter's own copy of importlib's bootstrap: always loaded
        from _frozen_importlib_external import MAGIC_NUMBER
    except ImportError:
        from importlib.util import MAGIC_NUMBER
    with io.open_code(path) as f:
        if f.read(len(MAGIC_NUMBER)) == MAGIC_NUMBER:
            import marshal
            f.read(12)
            return marshal.load(f), True
        f.seek(0)
        source = f.read()
    try:
        return compile(source, path, "exec", dont_inherit=True), False
    except ValueError:
        if b"\0" not in source:
            raise
        # 3.10's compile() refuses a NUL byte with a ValueError; the interpreter running the
        # file fails with a SyntaxError (exit status 1), in 3.12+'s words below.
        raise SyntaxError("source code cannot contain null bytes", (path, 1, 1, None)) from None


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
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):  # closed by the program
                pass
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(outcome.exit_code)


# ---- os._exit -----------------------------------------------------------------------------
# os._exit ends the process at once: no atexit, no finally. multiprocessing's fork children
# always end this way, and programs use it to skip cleanup. While peakline profiles, os._exit
# is wrapped so the callbacks below write the profile first; then the real os._exit runs with
# the same status. Callbacks must be quick and must not raise (errors are swallowed).
# The wrapper answers to what a program can read off the builtin (name, qualified name,
# module, doc, text signature, repr, pickling by reference); only type() tells it apart.
_real_os_exit = os._exit
_os_exit_callbacks: list = []


def _run_os_exit(status):
    for callback in list(_os_exit_callbacks):
        try:
            callback(status)
        except BaseException:  # noqa: BLE001 - the process is ending; never block that
            pass
    _real_os_exit(status)


class _BuiltinLike:
    """A Python callable dressed as the builtin it stands in for."""

    def __init__(self, call, real) -> None:
        self._call = call
        self._real = real
        for name in ("__name__", "__qualname__", "__module__", "__doc__",
                     "__text_signature__", "__self__"):
            self.__dict__[name] = getattr(real, name, None)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self._real)

    def __reduce__(self):
        # Unpickles as the builtin itself, in any process (peakline not needed there).
        return getattr, (_ModuleByName(self.__module__), self.__name__)


class _ModuleByName:
    """Pickles as ``importlib.import_module(name)``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self):
        import importlib
        return importlib.import_module, (self.name,)


_os_exit = _BuiltinLike(_run_os_exit, _real_os_exit)


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
# program exec'd by an unprofiled one would. An exec that cannot go ahead (what CPython refuses
# before the system call, or no executable file at the path) raises what it raises unprofiled,
# and nothing of peakline's runs; one that fails in the system call all the same returns to a
# program that now runs unprofiled. Callbacks must be quick and must not raise (errors are
# swallowed).
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


def _exec_goes_ahead(path, argv, env=None) -> bool:
    """Whether an exec can replace the image: argv and env pass CPython's own checks (argv a
    non-empty tuple or list whose first element is not empty; env names without "=" and no
    NUL anywhere) and path names an executable file (an int is a descriptor, for fexecve)."""
    if not isinstance(argv, (tuple, list)) or not argv or not argv[0]:
        return False
    if env is not None:
        try:
            for key, value in env.items():
                key, value = os.fsencode(key), os.fsencode(value)
                if not key or b"=" in key or b"\0" in key or b"\0" in value:
                    return False
        except (AttributeError, TypeError, ValueError):
            return False
    if isinstance(path, int):
        return True
    try:
        return os.access(path, os.X_OK) and not os.path.isdir(path)
    except (TypeError, ValueError):
        return False


def _execv(path, argv):
    if _exec_goes_ahead(path, argv):
        _before_exec()
    return _real_execv(path, argv)


def _execve(path, argv, env):
    if not _exec_goes_ahead(path, argv, env):
        return _real_execve(path, argv, env)
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
# until the handler reports in (session/signal_watch.h).
#
# The program must not see that handler: to it SIGTERM's handler is SIG_DFL, as unprofiled.
# signal.getsignal and signal.signal (Python functions of the signal module) are replaced by
# twins that report peakline's handler as SIG_DFL, so a program that installs its own handler
# and chains to the previous one finds SIG_DFL (not callable) and runs its own cleanup; once
# it has its own handler, SIGTERM is its business, as unprofiled. ``_thread.interrupt_main``
# gets a twin too: it does nothing for a signal whose handler is SIG_DFL, as the program sees
# it. A program that sets SIG_DFL gets peakline's handler back (it dies by SIGTERM either
# way, with its profile written).
# Only ``_signal.getsignal``, called directly, still shows the handler.
_real_signal = signal.signal
_real_getsignal = signal.getsignal
_real_interrupt_main = _thread.interrupt_main
_hidden_handlers: dict[int, object] = {}   # signal number -> peakline's handler


def _dressed(function, real):
    for name in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(function, name, getattr(real, name))
    wrapped = getattr(real, "__wrapped__", None)
    if wrapped is not None:
        function.__wrapped__ = wrapped
    return function


def _signal_twin(signalnum, handler):
    chain = _chained_handlers.get(int(signalnum)) if isinstance(signalnum, int) else None
    if chain is not None:
        return _set_program_handler(int(signalnum), chain, handler)
    hidden = _hidden_handlers.get(int(signalnum)) if isinstance(signalnum, int) else None
    if hidden is None:
        return _real_signal(signalnum, handler)
    if isinstance(handler, int) and handler == signal.SIG_DFL:
        previous = _real_signal(signalnum, hidden)
        _watch(int(signalnum))
    else:
        previous = _real_signal(signalnum, handler)
    return signal.Handlers.SIG_DFL if previous is hidden else previous


def _getsignal_twin(signalnum):
    chain = _chained_handlers.get(int(signalnum)) if isinstance(signalnum, int) else None
    if chain is not None:
        _real_getsignal(signalnum)  # the same errors for a bad number
        return chain[1]
    handler = _real_getsignal(signalnum)
    if isinstance(signalnum, int) and handler is not None and \
            handler is _hidden_handlers.get(int(signalnum)):
        return signal.Handlers.SIG_DFL
    return handler


def _interrupt_main_twin(signum=signal.SIGINT):
    # _thread.interrupt_main(signum) runs the signal's Python handler as if the signal had
    # come, and does nothing when the handler is SIG_DFL or SIG_IGN. Where peakline's handler
    # stands hidden, the program's handler is SIG_DFL: nothing happens, as unprofiled.
    if isinstance(signum, int) and _real_getsignal(signum) is not None and \
            _real_getsignal(signum) is _hidden_handlers.get(int(signum)):
        return None
    chain = _chained_handlers.get(int(signum)) if isinstance(signum, int) else None
    if chain is not None and not callable(chain[1]):
        return None   # the program's disposition is SIG_DFL or SIG_IGN: nothing, as unprofiled
    return _real_interrupt_main(signum)


_dressed(_signal_twin, _real_signal)
_dressed(_getsignal_twin, _real_getsignal)
_dressed(_interrupt_main_twin, _real_interrupt_main)


def _watch(signum: int) -> None:
    try:
        from peakline import _core

        _core.watch_signal(signum)
    except (ImportError, RuntimeError):  # no core (an odd platform), or the signal is refused
        pass


# ---- chained signals ----------------------------------------------------------------------
# The snapshot signal (snapshots.py; only with --snapshot-every, --live or --snapshot-signal) is
# peakline's *and* the program's: the kernel runs peakline's Python handler, which does its part and then calls the program's
# handler, if it set one, with the same arguments. To the program the signal is its own:
# signal.getsignal reports what it set (SIG_DFL before), signal.signal records its handler and
# returns the previous one, as unprofiled. One difference remains, by design: with SIG_DFL the
# signal no longer ends the program (it asks for a snapshot instead).
_chained_handlers: dict[int, list] = {}   # signal number -> [peakline's handler, program's]


def _set_program_handler(signum: int, chain: list, handler):
    if threading.current_thread() is not threading.main_thread():
        return _real_signal(signum, handler)   # the interpreter's ValueError, as unprofiled
    if not callable(handler) and not (isinstance(handler, int) and
                                      handler in (signal.SIG_DFL, signal.SIG_IGN)):
        raise TypeError("signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a callable "
                        "object")
    previous = chain[1]
    chain[1] = signal.Handlers(handler) if isinstance(handler, int) and \
        not isinstance(handler, signal.Handlers) else handler
    return previous


def call_program_handler(signum: int, frame) -> None:
    """From peakline's handler of a chained signal: the program's handler, if it set one."""
    chain = _chained_handlers.get(int(signum))
    if chain is not None and callable(chain[1]):
        chain[1](signum, frame)


def install_chained_handler(signum: int, handler) -> None:
    """``handler`` runs on signum; the program's own disposition is kept aside for it
    (``call_program_handler``) and shown to the program."""
    previous = _real_getsignal(signum)
    _real_signal(signum, handler)
    _chained_handlers[int(signum)] = [handler, signal.SIG_DFL if previous is None else previous]
    signal.signal = _signal_twin
    signal.getsignal = _getsignal_twin
    _thread.interrupt_main = _interrupt_main_twin


def uninstall_chained_handler(signum: int, handler) -> None:
    """The program's disposition back in place (before stand_down_program_signals)."""
    chain = _chained_handlers.get(int(signum))
    if chain is None or chain[0] is not handler:
        return
    del _chained_handlers[int(signum)]
    if _real_getsignal(signum) is handler:
        try:
            _real_signal(signum, chain[1])
        except (OSError, ValueError, TypeError):
            pass
    if not _hidden_handlers and not _chained_handlers:
        signal.signal = _real_signal
        signal.getsignal = _real_getsignal
        _thread.interrupt_main = _real_interrupt_main


def install_sigterm_handler(handler) -> None:
    """``signal.signal(SIGTERM, handler)``, with the core making sure the handler gets to run,
    and the program seeing SIG_DFL there. ``handler`` must call
    ``sigterm_handler_started(signum)`` first thing."""
    _real_signal(signal.SIGTERM, handler)
    _hidden_handlers[int(signal.SIGTERM)] = handler
    signal.signal = _signal_twin
    signal.getsignal = _getsignal_twin
    _thread.interrupt_main = _interrupt_main_twin
    _watch(signal.SIGTERM)


def uninstall_sigterm_handler(handler) -> None:
    """Back to SIG_DFL if ``handler`` is still installed; the signal module's own functions."""
    if _real_getsignal(signal.SIGTERM) is handler:
        _real_signal(signal.SIGTERM, signal.SIG_DFL)
    if _hidden_handlers.get(int(signal.SIGTERM)) is handler:
        del _hidden_handlers[int(signal.SIGTERM)]
    if not _hidden_handlers and not _chained_handlers:
        signal.signal = _real_signal
        signal.getsignal = _real_getsignal
        _thread.interrupt_main = _real_interrupt_main


def sigterm_handler_started(signum: int) -> None:
    # The process is dying by this signal: peakline's own signal.signal(signum, SIG_DFL)
    # before re-raising it must really install SIG_DFL.
    _hidden_handlers.pop(int(signum), None)
    try:
        from peakline import _core

        _core.signal_handled(signum)
    except ImportError:
        pass


# ---- after the program's last statement ---------------------------------------------------
# Unprofiled, the process is gone moments after the program's last statement; profiled, it
# still builds and writes the profile. Meanwhile nothing of the program may run: its interval
# timers are disarmed and its Python signal handlers stood down.

# Signals whose default action is to do nothing: SIG_IGN would change what they do
# (SIG_IGN on SIGCHLD reaps children by itself), SIG_DFL is what unprofiled would be.
_DEFAULT_IGNORED = frozenset(int(getattr(signal, name)) for name in (
    "SIGCHLD", "SIGURG", "SIGWINCH", "SIGCONT") if hasattr(signal, name))


def _run_pending_handlers() -> None:
    """Nothing: entering a Python function lets the main thread run the Python handlers of
    signals that have arrived."""


def stand_down_program_signals(keep=()) -> None:
    """Disarms the interval timers (ITIMER_REAL is also signal.alarm) and replaces every
    Python handler the program installed (not SIGINT's default, not ``keep``) by SIG_IGN (by
    SIG_DFL for signals whose default is to be ignored). A signal that already arrived runs
    its handler first, as it would have unprofiled: a handler whose signal is pending when it
    is replaced would be reported by CPython as "ignored due to race condition"."""
    for timer in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
        which = getattr(signal, timer, None)
        if which is not None:
            try:
                signal.setitimer(which, 0)
            except (OSError, ValueError):
                pass
    try:
        _run_pending_handlers()
    except BaseException:  # noqa: BLE001 - a handler of the program raised; it has ended
        pass
    for signum in signal.valid_signals():
        try:
            handler = _real_getsignal(signum)
        except (OSError, ValueError):
            continue
        if not callable(handler) or handler is signal.default_int_handler or \
                handler in keep or getattr(handler, "_peakline_handler", False):
            continue
        quiet = signal.SIG_DFL if int(signum) in _DEFAULT_IGNORED else signal.SIG_IGN
        try:
            _real_signal(signum, quiet)
        except Exception:  # noqa: BLE001 - a pending handler raised, or not settable
            try:
                _real_signal(signum, quiet)
            except Exception:  # noqa: BLE001
                pass


# ---- resources the profile needs ----------------------------------------------------------
# The profile is built after the program ends, importing the model and the reporters then (they
# are not resident while it runs). A program that used up its file descriptors or lowered its
# resource limits would make those imports, and the profile file, fail. So before it starts,
# peakline notes the limits, holds two spare descriptors (one pipe, numbered just below the
# descriptor limit, close-on-exec) and 32 MiB of address space (PROT_NONE: no memory, only
# address space, which an RLIMIT_AS cap counts); after it ends, the limits it lowered are
# raised back where the kernel allows it and the spares are released.
_LIMITS = ("RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_FSIZE")
SPARE_ADDRESS_SPACE_BYTES = 32 << 20


class Reserve:
    """What ``reserve()`` set aside for writing the profile; ``release()`` gives it back."""

    __slots__ = ("limits", "spares", "space")

    def __init__(self) -> None:
        self.limits: dict[int, tuple[int, int]] = {}
        self.spares: list[tuple[int, int, int]] = []   # (fd, st_dev, st_ino)
        self.space = None                              # an mmap of PROT_NONE pages

    def release(self) -> None:
        """Raises the limits the program lowered back (as far as allowed), closes the spares
        that are still the pipe this set aside (the program may have closed and reused them)."""
        resource = _resource_module()
        for which, (soft, hard) in self.limits.items():
            try:
                now_soft, now_hard = resource.getrlimit(which)
            except (OSError, ValueError, AttributeError):
                continue
            if _below(now_soft, soft) or _below(now_hard, hard):
                for wanted in ((soft, hard), (_min_limit(soft, now_hard), now_hard)):
                    try:
                        resource.setrlimit(which, wanted)
                        break
                    except (OSError, ValueError):
                        continue
        self.limits.clear()
        if self.space is not None:
            self.space.close()
            self.space = None
        for fd, dev, ino in self.spares:
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == (dev, ino):
                    os.close(fd)
            except OSError:
                pass
        self.spares.clear()


def _below(value: int, than: int) -> bool:
    infinity = getattr(_resource_module(), "RLIM_INFINITY", -1)
    if value == than:
        return False
    if than == infinity:
        return True
    return value != infinity and value < than


def _min_limit(a: int, b: int) -> int:
    infinity = getattr(_resource_module(), "RLIM_INFINITY", -1)
    if a == infinity:
        return b
    if b == infinity:
        return a
    return min(a, b)


def _resource_module():
    try:
        import resource
        return resource
    except ImportError:
        return None


def reserve() -> Reserve:
    """Before the program starts: note the limits, set two descriptors aside."""
    held = Reserve()
    resource = _resource_module()
    if resource is None:
        return held
    for name in _LIMITS:
        which = getattr(resource, name, None)
        if which is not None:
            try:
                held.limits[which] = resource.getrlimit(which)
            except (OSError, ValueError):
                pass
    try:
        import mmap
        # PROT_NONE (0; the mmap module has no name for it): never committed, never resident.
        held.space = mmap.mmap(-1, SPARE_ADDRESS_SPACE_BYTES,
                               flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)
    except (ImportError, OSError, ValueError, AttributeError):
        held.space = None
    soft = held.limits.get(getattr(resource, "RLIMIT_NOFILE", -1), (1024, 1024))[0]
    if soft == resource.RLIM_INFINITY or soft > 1 << 20:
        soft = 1 << 20
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return held
    target = soft - 1
    for fd in (read_end, write_end):
        # Just below the limit, so the program's own descriptors get the numbers they would
        # get unprofiled; where no such slot is free, the pipe keeps its numbers.
        while target > fd + 8:
            try:
                os.fstat(target)
            except OSError:
                break
            target -= 1
        if target > fd + 8:
            os.dup2(fd, target, inheritable=False)
            os.close(fd)
            fd = target
            target -= 1
        st = os.fstat(fd)
        held.spares.append((fd, st.st_dev, st.st_ino))
    return held
