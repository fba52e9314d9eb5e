"""`peakline run [options] script.py [args...]` and `peakline run [options] -m module [args...]`."""

from __future__ import annotations

import os
import signal
import sys

from peakline import run_options
from peakline.cli import options as _options
from peakline.cli.options import Option
from peakline.errors import UsageError
from peakline.interpreter import check_supported
from peakline.reporters import check_outputs
from peakline.runner import Outcome, Target
from peakline.session import Session, SessionOptions

DESCRIPTION = """\
Run a Python program under peakline. The program runs as __main__ with its own arguments,
stdin and stdout; its exit status is peakline's. The profile file is written when the
program ends — normally, by sys.exit, by an uncaught exception, by Ctrl-C or by SIGTERM —
and a line-level report is printed to stderr. DIR is a directory or zip archive with a
__main__.py, as for python. A program that cannot start (no such module, a syntax error) gets
Python's message and exit status, and no profile."""

USAGE = "peakline run [options] (script.py | DIR | -m module) [args ...]"


OPTIONS = [
    Option("-m", dest="module", metavar="MODULE", help="run a library module as a script"),
    # What the run measures: declared once for every surface (peakline/run_options.py).
    *run_options.cli_options(),
    Option("--no-report", dest="no_report", convert=None, const=True, default=False,
           help="write the profile file only"),
    Option("--snapshot-every", dest="snapshot_every", metavar="SECONDS",
           help="while the program runs, write the profile so far to the profile file every "
                "SECONDS (atomically; the final profile replaces the last snapshot); profiled "
                "children write theirs too, kept if one is killed before its end"),
    Option("--snapshot-signal", dest="snapshot_signal", metavar="SIG",
           help="a signal that writes a snapshot on demand (default: SIGUSR2 with "
                "--snapshot-every or --live, else none: the program's signals stay its own; "
                "none: off). The program's own handler of that signal still runs"),
    Option("--live", dest="live", convert=None, const=True, default=False,
           help="show a live view of the profile in the terminal while the program runs "
                "(q quits the view and stops profiling; the program runs on)"),
    Option("--live-output", dest="live_output", metavar="PATH",
           help="with --live: where the program's stdout and stderr go while the view is shown "
                "(default: the profile file's name with .out instead of .json)"),
    *_options.output_options(_options.RUN),
]

# Options that take a value: the command line is split at the first token that is neither
# one of our options nor its value, so the program's own options pass through untouched.
_VALUE_OPTIONS = _options.value_flags(OPTIONS)


def parse_options(tokens: list[str]) -> _options.Values:
    """peakline's own options (argparse only for --help and errors: cli/options.py)."""
    values = _options.parse(tokens, OPTIONS)
    if values is None:
        import argparse
        values = _options.parse_with_argparse(
            tokens, OPTIONS, prog="peakline run", description=DESCRIPTION, usage=USAGE,
            formatter_class=argparse.RawDescriptionHelpFormatter)
    return values


def split_command_line(argv: list[str], value_options: frozenset[str] = _VALUE_OPTIONS
                       ) -> tuple[list[str], Target | None]:
    """Splits argv into (peakline options, target). Target is None with --help or nothing.
    ``value_options``: the flags that take a value (`peakline check` adds its own)."""
    ours: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            i += 1
            break
        if tok == "-m":
            if i + 1 >= len(argv):
                raise UsageError("-m needs a module name")
            return ours, Target(module=argv[i + 1], args=argv[i + 2:])
        if tok.startswith("-m") and len(tok) > 2 and not tok.startswith("--"):
            return ours, Target(module=tok[2:], args=argv[i + 1:])
        if not tok.startswith("-") or tok == "-":
            break
        ours.append(tok)
        if tok in value_options:
            if i + 1 >= len(argv):
                raise UsageError(f"{tok} needs a value")
            ours.append(argv[i + 1])
            i += 1
        i += 1
    if i >= len(argv):
        return ours, None
    return ours, Target(script=argv[i], args=argv[i + 1:])


def default_outfile(target: Target) -> str:
    if target.script is not None:
        stem = os.path.splitext(os.path.basename(target.script))[0] or "program"
    else:
        stem = (target.module or "module").replace(".", "_")
    return f"peakline-{stem}.json"


def main(argv: list[str]) -> int:
    ours, target = split_command_line(argv)
    check_output_names(ours)
    try:
        opts = parse_options(ours)
    except SystemExit as exc:  # argparse already printed usage / help
        return int(exc.code or 0)
    target = program_to_run(target, opts, "run")
    check_script(target)
    check_supported()  # before the program runs, not after it
    run_options.check_command_line(opts)
    outfile = os.path.abspath(opts.outfile or default_outfile(target))
    # Nothing that cannot be written is found out after the run: the profile, the reports.
    check_profile_path(outfile, opts.outfile)
    check_outputs(opts)

    opts.snapshot_every = snapshot_interval(opts.snapshot_every)
    from peakline.snapshots import parse_signal
    if opts.snapshot_signal is not None:
        opts.snapshot_signal = parse_signal(opts.snapshot_signal)
    elif opts.snapshot_every is not None or opts.live:
        # Only when snapshots or the live view are asked for: otherwise SIGUSR2 stays the
        # program's, with its default disposition (it kills) as when unprofiled.
        opts.snapshot_signal = parse_signal("SIGUSR2")
    if opts.live_output and not opts.live:
        raise UsageError("--live-output needs --live")
    if opts.live:
        from peakline.live.app import check_live
        opts.live_output = check_live(opts.live_output, outfile)

    options = run_options.session_options(
        opts, internal_files=(os.path.abspath(sys.argv[0]),) if sys.argv and sys.argv[0] else ())
    return _profile_and_run(target, options, outfile, opts)


def program_to_run(target: Target | None, opts: _options.Values, command: str) -> Target:
    """The program a command line names: after the options, or as ``-m MODULE`` among them.
    UsageError when it names none."""
    if target is not None:
        return target
    if opts.module:
        return Target(module=opts.module)
    raise UsageError(f"no program to run: give a script path or -m module "
                     f"(see `peakline {command} --help`)")


def check_output_names(tokens: list[str]) -> None:
    """UsageError when an output option took a Python script as its file name:
    `peakline run --html script.py` (Scalene's --html takes no value) would write the report
    over the script, or run nothing."""
    for i, token in enumerate(tokens):
        flag, attached, value = token.partition("=")
        if flag not in ("--html", "--json", "--speedscope", "-o", "--outfile"):
            continue
        if not attached:
            value = tokens[i + 1] if i + 1 < len(tokens) else ""
        if value.endswith((".py", ".pyw")):
            stem = os.path.splitext(os.path.basename(value))[0] or "report"
            suffix = ".html" if flag == "--html" else ".json"
            raise UsageError(
                f"{flag} takes the output file name and got the script {value!r}; give the "
                f"output a name: `peakline run {flag} {stem}{suffix} {value}`")


def profile_only_unmatched(profile_only: tuple[str, ...], files) -> list[str]:
    """The --profile-only substrings that none of ``files`` (paths) contains."""
    return [part for part in profile_only if not any(part in name for name in files)]


def files_that_ran(profile, target: Target) -> set[str]:
    """Paths of the code the program ran: its script, every module it imported (this process
    is the program's), the reported files and every frame sampled (children included). A file
    that ran too briefly to be sampled still counts, so --profile-only is not called wrong
    for a short program. peakline's own imports count too: it errs towards saying nothing."""
    names = set(profile.files) | {f[0] for f in profile.stacks.frames if f}
    if target.script is not None:
        names.add(os.path.abspath(target.script))
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            names.add(path)
    return names
def snapshot_interval(text: str | None) -> float | None:
    """--snapshot-every: seconds, at least 0.1 (None when not given)."""
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise UsageError(f"--snapshot-every: {text!r} is not a number of seconds") from None
    if not (0.1 <= seconds <= 1e7):
        raise UsageError("--snapshot-every must be between 0.1 and 10000000 seconds")
    return seconds


def check_script(target: Target) -> None:
    """UsageError unless the target's script exists: a file, or a directory or zip archive
    with a __main__.py (whose absence Python itself reports when the program starts)."""
    if target.script is not None and not os.path.exists(target.script):
        raise UsageError(f"cannot run {target.script!r}: no such file")


def check_profile_path(path: str, given: str | None) -> None:
    """UsageError unless a file can be created at path (absolute): its folder exists, path is
    not a folder, and the folder takes a new file (tried, then removed)."""
    what = f"--outfile {given}" if given else f"profile file {path}"
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise UsageError(f"{what}: is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"{what}: no such directory {folder}")
    probe = os.path.join(folder, f".peakline-{os.getpid()}-check.tmp")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise UsageError(f"{what}: cannot create a file in {folder}: "
                         f"{error.strerror or error}") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass


def _profile_and_run(target: Target, options: SessionOptions, outfile: str, opts) -> int:
    from peakline import (_ray_env, child, finishing, process_exits, program_signals, reserve,
                          runner)

    session = Session(options, program=target.display, argv=[target.display, *target.args])
    tracker = None if not opts.children else child.ChildTracker(session.options)
    if tracker is not None:
        tracker.snapshot_every_s = opts.snapshot_every
    main_pid = os.getpid()
    # The profile is written once, whichever end comes first (peakline.finishing).
    write_once = finishing.WriteOnce()
    # Where peakline's own lines go: stderr as the program left it, or nowhere when the program
    # closed it (see _report_stream). Decided again when the program ends.
    report: list = [sys.stderr]

    def say(text: str) -> None:
        stream = report[0]
        if stream is not None:
            try:
                print(text, file=stream)
            except (OSError, ValueError):
                pass

    def write_and_report(outcome: Outcome, *, finishing_run: bool = True) -> None:
        write_once(_write_and_report, outcome, finishing_run)

    def _write_and_report(outcome: Outcome, finishing_run: bool) -> None:
        try:
            reserve_held.release()
            finish_long_running()
            # On SIGTERM do not wait for joblib's idle workers: the process must die now.
            profile = finishing.finish_profile(session, tracker, exit_code=outcome.exit_code,
                                               outfile=outfile,
                                               shutdown_executors=finishing_run)
            _report(profile)
        except Exception as error:  # noqa: BLE001 - the program's exit status comes first
            say(f"peakline: error: the profile could not be written: "
                f"{type(error).__name__}: {error}")

    def _report(profile) -> None:
        from peakline.reporters import render_outputs
        runner.flush_std_streams()
        stream = report[0]
        render_outputs(profile, opts,
                       text_stream=None if opts.no_report or stream is None else _Quiet(stream),
                       notes=_Quiet(stream), strict=False)
        if live is not None and live.source.stopped_by_view:
            say(f"peakline: profiling was stopped from the live view after "
                f"{profile.elapsed_s:.1f} s; the figures cover the run until then")
        say(f"peakline: profile written to {outfile}")
        if options.profile_only:
            for part in profile_only_unmatched(options.profile_only,
                                               files_that_ran(profile, target)):
                say(f"peakline: --profile-only {part!r} matched no file the program ran or "
                    f"imported; check the spelling, or leave it out to report every file "
                    f"of the program")

    def finish_on_sigterm(status: int) -> None:
        # A fork child inherits this handler: there it writes the child's own profile.
        if os.getpid() == main_pid:
            report[0] = _report_stream()
            write_and_report(Outcome(status), finishing_run=False)
        else:
            child.finish_forked_child(status)

    def on_sigterm(signum, frame):  # noqa: ARG001
        # Unprofiled, SIGTERM kills the process at once (no cleanup runs); we write what was
        # measured, then die by the same signal.
        write_once.sigterm(signum, finish_on_sigterm)

    on_sigterm._peakline_handler = True  # type: ignore[attr-defined]

    def on_os_exit(status: int) -> None:
        if os.getpid() == main_pid:
            report[0] = _report_stream()
            write_and_report(Outcome(status & 0xFF if isinstance(status, int) else 1),
                             finishing_run=False)

    def on_exec() -> None:
        # The program replaces itself (os.execv ...): the profile of the part before.
        if os.getpid() == main_pid:
            write_and_report(Outcome(None), finishing_run=False)  # type: ignore[arg-type]

    # Snapshots and the live view (docs/long-running.md): their threads start before the
    # session, so the core never measures them.
    from peakline import snapshots
    writer = snapshots.SnapshotWriter(session, outfile, opts.snapshot_every)
    snapshot_signal = (snapshots.SnapshotSignal(opts.snapshot_signal, writer)
                       if opts.snapshot_signal is not None else None)
    live = None
    if opts.live:
        from peakline.live.app import LiveRun
        live = LiveRun(session, opts.live_output, outfile)

    def finish_long_running() -> None:
        # Before the session stops: no snapshot under way, the view gone, the signal the
        # program's again. From a signal handler too (SIGTERM): each step is idempotent.
        if os.getpid() != main_pid:
            return
        if snapshot_signal is not None:
            snapshot_signal.uninstall()
        writer.close()
        if live is not None:
            live.close()
        for error in writer.errors[:1]:
            say(f"peakline: warning: {len(writer.errors)} snapshot(s) could not be written "
                f"({error})")
        writer.errors.clear()

    # In a child of a profiled program, this explicit run wins over the automatic child
    # session (docs/processes.md, "peakline inside a profiled child").
    child.step_aside_for_explicit_use("peakline run")
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        program_signals.install_sigterm_handler(on_sigterm)
    # Descriptors and limits the profile needs, kept from the program.
    reserve_held = reserve.reserve()
    if tracker is not None:
        tracker.install()
    if opts.snapshot_every is not None or snapshot_signal is not None:
        writer.start()
    if snapshot_signal is not None:
        snapshot_signal.install()
    if live is not None:
        live.start()
    try:
        session.start()
    except BaseException:
        finish_long_running()
        if tracker is not None:  # nothing ran: leave no directory behind
            tracker.uninstall()
            tracker.collect(shutdown_executors=False)
        raise
    process_exits.on_os_exit(on_os_exit)
    process_exits.on_exec(on_exec)
    outcome = runner.run(target)
    process_exits.remove_os_exit(on_os_exit)
    process_exits.remove_exec(on_exec)
    if os.getpid() != main_pid:
        # A child made by os.fork that returned instead of calling os._exit: it ends like the
        # unprofiled child would, with its own profile handed to the parent.
        outcome.release()
        child.finish_forked_child(outcome.exit_code)
        runner.report_uncaught(outcome)
        runner.finish(outcome)
        return outcome.exit_code
    # The program's last statement has run: none of its timers or handlers fire from now on.
    finish_long_running()
    program_signals.stand_down_program_signals(keep=(on_sigterm,))
    report[0] = _report_stream()
    if session.running:  # not after an os.exec* that failed once the profile was written
        session.stop()
    # Ray workers hand in their profiles while the program's objects still hold them (an
    # actor ends with its last handle).
    _ray_env.hand_in_ray_workers()
    outcome.release()
    if not outcome.started:
        # Nothing ran (no such module, a syntax error): the interpreter's message and status,
        # no report, no profile file.
        write_once.close()
        reserve_held.release()
        if tracker is not None:
            tracker.uninstall()
            tracker.collect(shutdown_executors=True)
        runner.report_uncaught(outcome)
    else:
        if opts.gpu and session.gpu_unavailable_reason:
            say(f"peakline: --gpu: nothing measured ({session.gpu_unavailable_reason})")
        runner.report_uncaught(outcome)
        # A SIGTERM meanwhile waits until the profile is written, then ends the process.
        write_and_report(outcome)
    program_signals.uninstall_sigterm_handler(on_sigterm)
    runner.finish(outcome)
    return outcome.exit_code


def _report_stream():
    """sys.stderr if the program left it usable, else None: closed (``sys.stderr.close()``),
    or its descriptor closed (``os.close(2)``; a file peakline opens could then take that
    number, so nothing may be written through it). A stream without a descriptor (the program
    swapped in a StringIO) is used as it is."""
    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):
        return None
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return stream
    try:
        os.fstat(fd)
    except OSError:
        return None
    return stream


class _Quiet:
    """A text stream (or none) whose write errors are dropped: the report never changes the
    program's exit status."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is not None:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self._stream = None
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._stream = None

    def isatty(self) -> bool:
        try:
            return self._stream is not None and self._stream.isatty()
        except (OSError, ValueError, AttributeError):
            return False

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
