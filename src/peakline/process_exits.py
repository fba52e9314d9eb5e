"""The ends of a profiled process that skip atexit and ``finally``: ``os._exit`` and
``os.exec*``, each wrapped while peakline profiles so that the profile is written first
(``on_os_exit``, ``on_exec``: peakline.finishing does the writing); and the interpreter's
flag that makes it die by SIGINT after an uncaught KeyboardInterrupt, which building a
profile at exit would otherwise reset.
"""

from __future__ import annotations

import os
import sys


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
# _Py_UnhandledKeyboardInterrupt flag). Building a profile at exit does (model/schema.py: each record's __init__), so the
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

