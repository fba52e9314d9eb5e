"""Attach to a running CPython process, profile it for a while, detach (`peakline attach`).

    attachment = Attachment.attach(pid, SessionOptions(memory=True))
    ...                                   # the target runs on, profiled
    profile = attachment.detach()         # a peakline.model.Profile; the target runs on as before

How the session gets into the target: a few lines of Python (``_bootstrap_code``) run on its
main thread — ``sys.remote_exec`` (PEP 768) on CPython 3.14+, peakline's own ptrace injector
on 3.10-3.13 (src/native/attach/ptrace_injector.h: no debugger needed). They import
peakline._attach_agent from this peakline installation, which starts an ordinary session and
talks to this process over a Unix socket in a private temporary directory. The raw data comes
back here and the profile is built here, so the target does not import the model or the
reporters. Memory figures count from the attach moment (the profile's ``attached`` object).

A live view polls ``Attachment.profile_so_far()`` for the profile so far (docs/long-running.md).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time

# One message framing for both ends: the agent's (it imports only builtins).
from peakline._attach_agent import _recv, _send
from peakline.errors import PeaklineError
from peakline.session import SessionOptions

# CPython versions the ptrace injector serves (frame layouts of the core: 3.10-3.13); 3.14+
# goes through sys.remote_exec.
PTRACE_VERSIONS = ((3, 10), (3, 11), (3, 12), (3, 13))
REMOTE_EXEC_FROM = (3, 14)
DEFAULT_START_TIMEOUT_S = 10.0


class AttachError(PeaklineError):
    """The target cannot be attached to (not CPython, unsupported version, not permitted,
    already attached, gone) or the attachment failed; the message is one line."""

    exit_code = 6


def _version_text(hexversion: int) -> str:
    return f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}"


def check_target(pid: int) -> tuple[int, int]:
    """(major, minor) of the target's CPython; AttachError when it cannot be attached to."""
    if pid <= 0:
        raise AttachError(f"not a process id: {pid}")
    if pid == os.getpid():
        raise AttachError("cannot attach to peakline's own process")
    if not os.path.exists(f"/proc/{pid}"):
        raise AttachError(f"no process {pid}")
    from peakline import _core
    error, _object, hexversion = _core.attach_probe(pid)
    if error:
        raise AttachError(error)
    if not hexversion:
        raise AttachError(f"process {pid} runs a CPython older than 3.10 (neither Py_Version "
                          "nor 3.10's PyAIter_Check); peakline attach supports 3.10-3.15")
    version = (hexversion >> 24, (hexversion >> 16) & 0xFF)
    mine = sys.version_info[:2]
    if version != mine:
        raise AttachError(f"process {pid} runs CPython {_version_text(hexversion)}; this peakline "
                          f"runs on {mine[0]}.{mine[1]} and can only attach to the same version "
                          f"(run the peakline installed for {_version_text(hexversion)})")
    if version not in PTRACE_VERSIONS and version < REMOTE_EXEC_FROM:
        raise AttachError(f"CPython {_version_text(hexversion)} is not supported")
    return version


def _package_parent() -> str:
    """The directory from which the target imports this peakline (its package's parent)."""
    import peakline
    return os.path.dirname(os.path.dirname(os.path.abspath(peakline.__file__)))


def _bootstrap_code(socket_path: str, page_placeholder: str, options: SessionOptions) -> str:
    """The text run in the target. It binds no name in ``__main__`` (PyRun_SimpleString runs
    in its namespace): one ``exec`` call with a fresh globals dict. Nothing escapes it: an
    exception would reach the interpreter as a failed pending call. This peakline's package
    directory is put first on sys.path only for the import, then removed."""
    inner = f"""
def _run():
    import os, sys
    if not os.path.exists({socket_path!r}):  # the attaching command gave up: stay out
        return
    parent = {_package_parent()!r}
    loaded = sys.modules.get("peakline")
    added = False
    if loaded is None:
        sys.path.insert(0, parent)
        added = True
    try:
        from peakline import _attach_agent
    finally:
        if added:
            try:
                sys.path.remove(parent)
            except ValueError:
                pass
    _attach_agent.begin({socket_path!r}, @@PAGE@@, @@LENGTH@@, {options.to_json()!r})
try:
    _run()
except BaseException as exc:  # say why to the attaching command, if it still listens
    try:
        import _socket, marshal
        body = marshal.dumps({{"error": "cannot start: %s: %s" % (type(exc).__name__, exc)}})
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(5.0)
        s.connect({socket_path!r})
        s.sendall(len(body).to_bytes(8, "big") + body)
        s.close()
    except BaseException:
        pass
"""
    inner = inner.replace("@@PAGE@@", page_placeholder)
    code = f"exec({inner!r}, {{'__builtins__': __builtins__}})"
    # The page's length (the injector maps the text plus its NUL, rounded up to pages).
    length = (len(code.encode()) + 1 + 4095) // 4096 * 4096
    return code.replace("@@LENGTH@@", str(length).rjust(len("@@LENGTH@@")))


class Attachment:
    """One attachment to a running process. Use ``Attachment.attach``; ``detach`` once."""

    def __init__(self, pid: int, options: SessionOptions, directory: str,
                 connection: socket.socket, mode: str, started_at: float) -> None:
        self.pid = pid
        self.options = options
        self.mode = mode                  # "direct", "pending-call" or "remote_exec"
        self.started_at = started_at      # epoch seconds, the target's clock
        self._directory = directory
        self._connection = connection
        self._detached = False
        self._out_of_step = False         # a request was interrupted half-way (Ctrl-C)

    @classmethod
    def attach(cls, pid: int, options: SessionOptions | None = None, *,
               start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Attachment:
        """Starts a session in process ``pid``; AttachError with a one-line reason if not."""
        options = options or SessionOptions()
        version = check_target(pid)
        directory = tempfile.mkdtemp(prefix="peakline-attach-")
        listener = None
        keep_script = False
        try:
            _let_target_in(directory, pid)
            path = os.path.join(directory, "control")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            listener.listen(1)
            from peakline import _core
            placeholder = _core.attach_page_placeholder()
            code = _bootstrap_code(path, placeholder, options)
            if version >= REMOTE_EXEC_FROM:
                mode = _remote_exec(pid, code.replace(placeholder, "0x" + "0" * 16), directory)
                # The target reads the script when it runs it, maybe after we gave up: from
                # now on the directory is the script's to remove (_remote_exec), ours only
                # once the target has connected.
                keep_script = True
            else:
                error, mode, _page = _core.attach_inject(pid, code, 5000)
                if error:
                    raise AttachError(error)
            listener.settimeout(start_timeout_s)
            try:
                connection, _ = listener.accept()
            except socket.timeout:
                raise AttachError(
                    f"process {pid} did not run peakline's start-up code within "
                    f"{start_timeout_s:g} s: its main thread is in native code or in a system "
                    "call that peakline does not interrupt; the queued start-up code will find "
                    "no one and do nothing") from None
            keep_script = False
            connection.settimeout(start_timeout_s)
            reply = _recv(connection)
            if reply is None or "error" in reply:
                connection.close()
                why = (reply or {}).get("error", "the connection closed")
                raise AttachError(f"process {pid}: {why}")
            connection.settimeout(None)
            return cls(pid, options, directory, connection, mode, reply["started_at"])
        except BaseException:
            if keep_script:
                _remove_quietly(os.path.join(directory, "control"))
            else:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            if listener is not None:
                listener.close()

    def profile_so_far(self):
        """The profile of the attachment so far, without stopping it (the live view of
        ``peakline attach --live`` polls it): the target's session is read, not reset
        (Session.snapshot_raw), so each one covers the attachment from its start.

        If the target exits meanwhile, its final data arrives instead (unasked, from its
        atexit handler): then the attachment is over and the final profile is returned, with
        ``attached.process_exited`` true. ProfilerStateError if the target could not take a
        snapshot (its session stopping because it exits: ``wait_for_exit`` gets the data)."""
        from peakline.errors import ProfilerStateError
        reply = self._request("snapshot")
        if reply.get("exited"):
            return self.build(reply)
        if "error" in reply:
            raise ProfilerStateError(reply["error"])
        return self._build(reply)

    @property
    def detached(self) -> bool:
        """True once detached, closed, or the target's final data has arrived."""
        return self._detached

    def detach(self):
        """Stops the session in the target, undoes it there and returns the Profile."""
        if self._detached:
            raise AttachError("already detached")
        if self._out_of_step:
            self.close()
            raise AttachError(f"process {self.pid}: a request was interrupted half-way, so no "
                              "profile can be read; the process stops profiling and undoes it "
                              "by itself now that the connection is closed")
        try:
            reply = self._request("stop")
        finally:
            self.close()
        if "error" in reply:
            raise AttachError(f"process {self.pid}: {reply['error']}")
        return self._build(reply)

    def wait_for_exit(self, timeout_s: float | None) -> dict | None:
        """Waits until the target exits (its data arrives unasked) or timeout_s passes; the
        data or None."""
        self._connection.settimeout(timeout_s)
        try:
            reply = _recv(self._connection)
        except socket.timeout:
            return None
        finally:
            if not self._detached:
                self._connection.settimeout(None)
        if reply is None:
            raise AttachError(f"process {self.pid} ended without sending its profile")
        return reply

    def build(self, reply: dict):
        self.close()
        if "error" in reply:
            raise AttachError(f"process {self.pid}: {reply['error']}")
        return self._build(reply)

    def close(self) -> None:
        """Drops the connection; the target stops its session by itself when it sees that."""
        if not self._detached:
            self._detached = True
            try:
                self._connection.close()
            finally:
                shutil.rmtree(self._directory, ignore_errors=True)

    def _request(self, command: str) -> dict:
        try:
            try:
                _send(self._connection, {"cmd": command})
            except OSError:
                # The target closed its end: if it exited while attached, its final data is
                # already waiting here (the reply is then that data, marked "exited").
                pass
            reply = _recv(self._connection)
        except OSError as exc:
            raise AttachError(f"process {self.pid}: the control connection failed: {exc}") from exc
        except BaseException:  # KeyboardInterrupt between two bytes of a message
            self._out_of_step = True
            raise
        if reply is None:
            raise AttachError(f"process {self.pid} ended before sending its profile")
        return reply

    def _build(self, reply: dict):
        from peakline.model.builder import build_profile
        from peakline.model.profile import Profile
        from peakline.model.selection import FileSelection

        raw = _without_thread(reply["raw"], reply.get("control_tid") or 0)
        meta = dict(reply["meta"])
        options = self.options
        selection = FileSelection(profile_all=options.profile_all,
                                  profile_only=list(options.profile_only),
                                  profile_exclude=list(options.profile_exclude),
                                  library_dirs=reply["library_dirs"])
        profile = build_profile(raw, meta=meta, selection=selection)
        doc = profile.to_dict()
        doc["attached"] = {"method": self.mode, "memory_counts_from": "attach",
                           "process_exited": bool(reply.get("exited")),
                           "detach_problem": reply.get("release_problem")}
        return Profile.from_dict(doc, source=f"attach {self.pid}")


def _let_target_in(directory: str, pid: int) -> None:
    """The socket's directory is private (0700); owned by the target's user when we are root
    and it is not, so that the target can connect."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError as exc:
        raise AttachError(f"no process {pid}") from exc
    if uid != os.geteuid() and os.geteuid() == 0:
        os.chown(directory, uid, -1)


def _remote_exec(pid: int, code: str, directory: str) -> str:
    """CPython 3.14+: PEP 768's sys.remote_exec has the target's main thread run a script
    file at its next safe point: the same start-up code as the ptrace path, in a file.

    The target opens the file only when it runs it: when its main thread next executes
    bytecode, which for a thread blocked in a system call (sleep, input(), join) is when the
    call returns, maybe long after `--attach-timeout`. A missing file would then be reported
    on the target's stderr, so the file stays until the script has run, and the script
    removes it (and the directory, once empty) itself, first thing."""
    if not hasattr(sys, "remote_exec"):
        raise AttachError("this CPython has no sys.remote_exec; run the peakline installed "
                          "for the target's CPython")
    if not sys.is_remote_debug_enabled():
        raise AttachError("remote debugging is disabled in this peakline's own Python "
                          "(PYTHON_DISABLE_REMOTE_DEBUG in the environment or -X "
                          "disable-remote-debug): sys.remote_exec, which peakline attach uses "
                          "on CPython 3.14+, refuses then")
    script = os.path.join(directory, "start.py")
    cleanup = (f"import os\nfor f in (os.unlink, os.rmdir):\n"
               f"    try: f({script!r} if f is os.unlink else {directory!r})\n"
               f"    except OSError: pass\n")
    with open(script, "w", encoding="utf-8") as out:
        out.write(f"exec({cleanup!r}, {{}})\n{code}\n")
    os.chmod(script, 0o644)
    try:
        sys.remote_exec(pid, script)
    except PermissionError as exc:
        os.unlink(script)
        raise AttachError(f"not permitted to trace process {pid} (sys.remote_exec: {exc}; it "
                          "must belong to the same user, or run peakline as root / with "
                          "CAP_SYS_PTRACE; in a container add --cap-add=SYS_PTRACE)") from None
    except (OSError, RuntimeError) as exc:
        os.unlink(script)
        if "remote process" in str(exc):
            raise AttachError(
                f"process {pid} has remote debugging disabled (PYTHON_DISABLE_REMOTE_DEBUG in "
                "its environment, -X disable-remote-debug, or a CPython built "
                "--without-remote-debug): on CPython 3.14+ peakline attach needs "
                "sys.remote_exec (PEP 768)") from None
        raise AttachError(f"sys.remote_exec({pid}) failed: {exc}") from exc
    return "remote_exec"


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _without_thread(raw: dict, tid: int) -> dict:
    """The raw data without the agent's control thread (it only waits on its socket)."""
    from peakline.model.raw import Stack, Thread

    if not tid:
        return raw
    keep = [i for i, row in enumerate(raw.get("stacks", ())) if Stack(*row).tid != tid]
    out = dict(raw)
    out["stacks"] = [raw["stacks"][i] for i in keep]
    out["threads"] = [t for t in raw.get("threads", ()) if Thread(*t).tid != tid]
    if raw.get("memory") is not None:
        memory = dict(raw["memory"])
        memory["stacks"] = [raw["memory"]["stacks"][i] for i in keep]
        out["memory"] = memory
    gpu = raw.get("gpu")
    if gpu is not None and gpu.get("stacks"):
        gpu = dict(gpu)
        gpu["stacks"] = [raw["gpu"]["stacks"][i] for i in keep]
        out["gpu"] = gpu
    return out


def profile_for(pid: int, duration_s: float | None, options: SessionOptions, *,
                start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                on_attached=None):
    """Attach, profile for ``duration_s`` (None: until KeyboardInterrupt) or until the
    target exits, detach; the Profile. ``on_attached(attachment)`` is called once attached."""
    attachment = Attachment.attach(pid, options, start_timeout_s=start_timeout_s)
    try:
        if on_attached is not None:
            on_attached(attachment)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if left == 0.0:
                    break
                data = attachment.wait_for_exit(0.5 if left is None else min(left, 0.5))
                if data is not None:  # the target exited while attached
                    return attachment.build(data)
        except KeyboardInterrupt:
            pass
        return attachment.detach()
    finally:
        attachment.close()
