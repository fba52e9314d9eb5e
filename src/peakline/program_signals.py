"""Signals peakline handles in the program's process, without the program seeing them.

* SIGTERM: peakline's handler writes the profile, then the process dies by the signal, as
  unprofiled (peakline.finishing); the program sees SIG_DFL.
* Chained signals: the snapshot signal (peakline.snapshots) is peakline's and the program's.
* After the program's last statement, none of its timers or handlers may run any more
  (``stand_down_program_signals``).
"""

from __future__ import annotations

import _thread
import signal
import threading


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
real_signal = signal.signal
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
        return real_signal(signalnum, handler)
    if isinstance(handler, int) and handler == signal.SIG_DFL:
        previous = real_signal(signalnum, hidden)
        _watch(int(signalnum))
    else:
        previous = real_signal(signalnum, handler)
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


_dressed(_signal_twin, real_signal)
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
        return real_signal(signum, handler)   # the interpreter's ValueError, as unprofiled
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
    real_signal(signum, handler)
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
            real_signal(signum, chain[1])
        except (OSError, ValueError, TypeError):
            pass
    if not _hidden_handlers and not _chained_handlers:
        signal.signal = real_signal
        signal.getsignal = _real_getsignal
        _thread.interrupt_main = _real_interrupt_main


def install_sigterm_handler(handler) -> None:
    """``signal.signal(SIGTERM, handler)``, with the core making sure the handler gets to run,
    and the program seeing SIG_DFL there. ``handler`` must call
    ``sigterm_handler_started(signum)`` first thing."""
    real_signal(signal.SIGTERM, handler)
    _hidden_handlers[int(signal.SIGTERM)] = handler
    signal.signal = _signal_twin
    signal.getsignal = _getsignal_twin
    _thread.interrupt_main = _interrupt_main_twin
    _watch(signal.SIGTERM)


def uninstall_sigterm_handler(handler) -> None:
    """Back to SIG_DFL if ``handler`` is still installed; the signal module's own functions."""
    if _real_getsignal(signal.SIGTERM) is handler:
        real_signal(signal.SIGTERM, signal.SIG_DFL)
    if _hidden_handlers.get(int(signal.SIGTERM)) is handler:
        del _hidden_handlers[int(signal.SIGTERM)]
    if not _hidden_handlers and not _chained_handlers:
        signal.signal = real_signal
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
            real_signal(signum, quiet)
        except Exception:  # noqa: BLE001 - a pending handler raised, or not settable
            try:
                real_signal(signum, quiet)
            except Exception:  # noqa: BLE001
                pass

