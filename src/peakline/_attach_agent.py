"""The part of `peakline attach` that runs inside the attached process.

peakline.attach gets a few lines of Python run on the target's main thread (by ptrace on
CPython 3.10-3.13, by ``sys.remote_exec`` on 3.14+; src/native/attach/ptrace_injector.h). Those
lines import this module and call ``begin``, which connects to the attaching command's Unix
socket, starts an ordinary peakline session (peakline.session) and hands the connection to a
control thread. The control thread waits for one command:

    {"cmd": "stop"}      stop the session, send its raw data, undo everything, end.
    {"cmd": "snapshot"}  send the data so far without stopping (Session.snapshot_raw; the
                         live view of `peakline attach --live` asks once a second); answers
                         {"error": ...} if the session is no longer running.

The connection closing without a command (the attaching command was killed) stops the session
too, and the data is dropped. If the process exits while attached, an atexit handler stops
the session and sends what was measured, with ``"exited": True``.

The profile itself is built by the attaching command (peakline.attach), not here: building it
imports the model and reporters (typing, json, ...: ~2 MiB resident) into a process
that is meant to go on as before. What stays in the process after detaching: this module,
peakline.session and the modules they import (sys.modules keeps them), and the loaded core
extension with its inert hooks (docs/long-running.md, "Attach").

Messages are an 8-byte big-endian length and a ``marshal`` payload (built in: nothing imported
for the protocol; both ends run the same CPython version, which peakline.attach checks).
"""

from __future__ import annotations

import _socket
import _thread
import marshal
import os
import sys

# The attachment in progress in this process, or None. Guarded by _lock.
_lock = _thread.allocate_lock()
_state: dict | None = None
# One message at a time on the connection: the control thread's reply to a snapshot and the
# atexit handler's data may be sent at the same time.
_send_lock = _thread.allocate_lock()


def _send(sock, message: dict) -> None:
    body = marshal.dumps(message)
    sock.sendall(len(body).to_bytes(8, "big") + body)


def _recv(sock) -> dict | None:
    head = _recv_exactly(sock, 8)
    if head is None:
        return None
    body = _recv_exactly(sock, int.from_bytes(head, "big"))
    return None if body is None else marshal.loads(body)


def _recv_exactly(sock, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _release_page(page: int, length: int) -> None:
    """The page the bootstrap text came in (pending-call mode only; 0 otherwise)."""
    if page:
        from peakline import _core
        _core.attach_release_page(page, length)


def begin(socket_path: str, page: int, page_length: int, options: dict) -> None:
    """Called by the injected bootstrap on the main thread, GIL held. Never raises."""
    global _state
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(10.0)
        sock.connect(socket_path)
        sock.settimeout(None)
    except OSError:  # the attaching command gave up before this ran: nothing to do
        _release_page(page, page_length)
        return
    try:
        from peakline.session import Session, SessionOptions, current_session
        from peakline import _core
        with _lock:
            if _state is not None:
                raise RuntimeError(f"already attached (by peakline attach, process "
                                   f"{_state['attacher_pid']})")
            if current_session() is not None or _core.active():
                raise RuntimeError("already being profiled by peakline (run, API or attach)")
            session = Session(SessionOptions.from_json(options), program=_program(),
                              argv=list(sys.argv))
            session.print_warnings = False  # the warning travels in the data, not to stderr
            session.start()
            _state = {"session": session, "sock": sock, "page": page,
                      "page_length": page_length, "attacher_pid": _peer_pid(sock),
                      "control_tid": 0, "done": False, "closed": _thread.allocate_lock()}
            _state["closed"].acquire()  # released by the control thread when it is done
        import atexit
        state = _state
        state["at_exit"] = lambda: _at_exit(state)  # this attachment's own, to unregister
        atexit.register(state["at_exit"])
        _send(sock, {"started": True, "pid": os.getpid(), "started_at": session._started_wall})
        _thread.start_new_thread(_control, ())
    except BaseException as exc:  # noqa: BLE001 - reported to the attaching command
        try:
            _send(sock, {"error": f"{type(exc).__name__}: {exc}"})
            sock.close()
        except OSError:
            pass
        if _state is None or _state["sock"] is not sock:
            _release_page(page, page_length)


def _peer_pid(sock) -> int:
    try:  # SO_PEERCRED: struct ucred, three native ints (pid first)
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        return int.from_bytes(raw[:4], sys.byteorder)
    except (OSError, AttributeError):
        return 0


def _program() -> str:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path:
        return os.path.basename(path)
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "<python>"


def _control() -> None:
    """The control thread: waits for the attaching command's commands (no GIL while waiting).

    It is peakline's own, like the snapshot thread of `peakline run`: it takes itself out of
    the measurement first thing (never sampled, its allocations and frees not counted: what
    building a snapshot or the final data allocates is not the program's). Its thread id
    still goes with the data, so the attaching command drops anything registered for it
    before that (peakline.attach)."""
    from peakline.session import exclude_current_thread, own_thread_ending

    state = _state
    state["control_tid"] = _thread.get_native_id()
    sock = state["sock"]
    exclude_current_thread()
    try:
        while True:
            try:
                message = _recv(sock)
            except OSError:
                message = None
            command = (message or {}).get("cmd")
            if command == "snapshot":
                _reply(sock, _snapshot(state))
                continue
            data = _finish(state, exited=False)
            if command == "stop" and data is not None:
                _reply(sock, data)
            break
    finally:
        own_thread_ending()
        _close(state)
        # Only now, after the reply: an exit meanwhile must find the handler and wait here.
        try:
            import atexit
            atexit.unregister(state["at_exit"])
        except Exception:  # noqa: BLE001 - interpreter shutting down
            pass
        state["closed"].release()


def _reply(sock, message: dict) -> None:
    try:
        with _send_lock:
            _send(sock, message)
    except OSError:
        pass


def _snapshot(state: dict) -> dict:
    session = state["session"]
    try:
        raw = session.snapshot_raw()
    except BaseException as exc:  # noqa: BLE001 - stopped meanwhile (exiting): reported
        return {"error": f"no snapshot: {type(exc).__name__}: {exc}"}
    return _data(session, raw, exited=False, control_tid=state["control_tid"])


def _finish(state: dict, *, exited: bool) -> dict | None:
    """Stops the session once (control thread or atexit, whichever comes first)."""
    global _state
    with _lock:
        if state["done"]:
            return None
        state["done"] = True
    try:
        return _stop(state, exited=exited)
    finally:
        with _lock:  # free for the next attachment before the reply goes out
            if _state is state:
                _state = None


def _stop(state: dict, *, exited: bool) -> dict:
    session = state["session"]
    try:
        session.stop()
        raw = session._raw
        # What a session otherwise keeps for the life of the process (the sigaction/dlopen/
        # dlsym hooks, the sampling signal's handler) goes too: the process is left as it was.
        from peakline import _core
        problem = _core.release_process(500)
    except BaseException as exc:  # noqa: BLE001 - reported to the attaching command
        return {"error": f"stopping the session failed: {type(exc).__name__}: {exc}"}
    data = _data(session, raw, exited=exited, control_tid=state["control_tid"])
    data["release_problem"] = problem or None
    return data


def _data(session, raw: dict, *, exited: bool, control_tid: int) -> dict:
    """What the attaching command needs to build the profile as if built here."""
    from peakline.model.selection import default_library_dirs
    from peakline.session import peak_rss_bytes

    return {
        "raw": raw,
        "exited": exited,
        "control_tid": control_tid,
        "library_dirs": list(default_library_dirs()),
        "meta": {
            "program": session.program,
            "argv": session.argv,
            "pid": os.getpid(),
            "started_at": session._started_wall,
            "elapsed_s": session.elapsed_s(),
            "exit_code": None,
            "options": session.options.as_profile_options(),
            "thread_names": session._thread_names.snapshot(),
            "peak_rss_bytes": peak_rss_bytes() if session.options.memory else None,
            "python_version": sys.version.split()[0],
        },
    }


def _at_exit(state: dict) -> None:
    """The process is exiting while attached: send what was measured."""
    data = _finish(state, exited=True)
    if data is not None:
        _reply(state["sock"], data)
    else:
        # The control thread is stopping the session on a "stop" that came first: the
        # interpreter would end it half-way, and the attaching command would get no profile.
        # Wait for its reply (the lock is taken without the GIL).
        if state["closed"].acquire(timeout=10.0):
            state["closed"].release()


def _close(state: dict) -> None:
    try:
        state["sock"].close()
    except OSError:
        pass
    _release_page(state["page"], state["page_length"])
