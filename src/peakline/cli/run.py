"""`peakline run [options] script.py [args...]` and `peakline run [options] -m module [args...]`."""

from __future__ import annotations

import os
import signal
import sys

from peakline.cli import options as _options
from peakline.cli.options import Option
from peakline.errors import UsageError
from peakline.reporters import check_outputs
from peakline.runner import Outcome, Target
from peakline.session import DEFAULT_CPU_INTERVAL_S, Session, SessionOptions

DESCRIPTION = """\
Run a Python program under peakline. The program runs as __main__ with its own arguments,
stdin and stdout; its exit status is peakline's. The profile file is written when the
program ends — normally, by sys.exit, by an uncaught exception, by Ctrl-C or by SIGTERM —
and a line-level report is printed to stderr."""

USAGE = "peakline run [options] (script.py | -m module) [args ...]"


def _byte_size(text: str) -> int:
    value = _options.byte_size(text)
    if value < 1024:
        raise ValueError(f"must be at least 1K, got {text!r}")
    return value


OPTIONS = [
    Option("-m", dest="module", metavar="MODULE", help="run a library module as a script"),
    Option("-o", "--outfile", dest="outfile", metavar="PATH",
           help="where to write the profile (default: peakline-<script>.json in the current "
                "directory)"),
    Option("--cpu-sampling-rate", dest="cpu_sampling_rate", convert=float,
           default=DEFAULT_CPU_INTERVAL_S, metavar="SECONDS",
           help="CPU sampling interval in seconds of each thread's CPU time "
                f"(default: {DEFAULT_CPU_INTERVAL_S})"),
    Option("--profile-all", dest="profile_all", convert=None, const=True, default=False,
           help="report every file, libraries and the standard library included"),
    Option("--profile-only", dest="profile_only", default="", metavar="A,B",
           help="report only files whose path contains one of these substrings"),
    Option("--profile-exclude", dest="profile_exclude", default="", metavar="A,B",
           help="do not report files whose path contains one of these substrings"),
    Option("--cpu-only", dest="cpu_only", convert=None, const=True, default=False,
           help="profile CPU time only: no allocation hooks, no memory or copy columns"),
    Option("--memory-sampling-interval", dest="memory_sampling_interval", convert=_byte_size,
           default=512 * 1024, metavar="BYTES",
           help="mean number of allocated bytes between two memory samples (accepts K, M, G "
                "suffixes; default: 512K). Smaller is more precise per line and slower; "
                "allocations much larger than this are attributed exactly either way"),
    Option("--gpu", dest="gpu", convert=None, const=True,
           help="profile the NVIDIA GPU through NVML (default: on when a device is found)"),
    Option("--no-gpu", dest="gpu", convert=None, const=False, help="do not profile the GPU"),
    Option("--no-report", dest="no_report", convert=None, const=True, default=False,
           help="write the profile file only"),
    Option("--no-children", dest="no_children", convert=None, const=True, default=False,
           help="do not profile the Python processes the program starts (by default they are "
                "profiled and merged into this report)"),
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


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def default_outfile(target: Target) -> str:
    if target.script is not None:
        stem = os.path.splitext(os.path.basename(target.script))[0] or "program"
    else:
        stem = (target.module or "module").replace(".", "_")
    return f"peakline-{stem}.json"


def main(argv: list[str]) -> int:
    ours, target = split_command_line(argv)
    try:
        opts = parse_options(ours)
    except SystemExit as exc:  # argparse already printed usage / help
        return int(exc.code or 0)
    if target is None:
        if opts.module:
            target = Target(module=opts.module)
        else:
            raise UsageError("no program to run: give a script path or -m module "
                             "(see `peakline run --help`)")
    if target.script is not None and not os.path.isfile(target.script):
        raise UsageError(f"cannot run {target.script!r}: no such file")
    if not (0.001 <= opts.cpu_sampling_rate <= 1.0):
        raise UsageError("--cpu-sampling-rate must be between 0.001 and 1 second")
    check_outputs(opts)  # a report that cannot be written fails now, not after the run

    options = SessionOptions(
        cpu_sampling_interval_s=opts.cpu_sampling_rate,
        profile_all=opts.profile_all,
        profile_only=_csv(opts.profile_only),
        profile_exclude=_csv(opts.profile_exclude),
        internal_files=(os.path.abspath(sys.argv[0]),) if sys.argv and sys.argv[0] else (),
        memory=not opts.cpu_only,
        memory_sampling_interval_bytes=opts.memory_sampling_interval,
        gpu=opts.gpu,
    )
    outfile = os.path.abspath(opts.outfile or default_outfile(target))
    return _profile_and_run(target, options, outfile, opts)


def _profile_and_run(target: Target, options: SessionOptions, outfile: str, opts) -> int:
    from peakline import child, runner

    session = Session(options, program=target.display, argv=[target.display, *target.args])
    tracker = None if opts.no_children else child.ChildTracker(options)
    main_pid = os.getpid()
    written = False
    writing = False

    def write_and_report(outcome: Outcome, *, finishing: bool = True) -> None:
        nonlocal written, writing
        if written:
            return
        written = writing = True
        try:
            _write_and_report(outcome, finishing)
        finally:
            writing = False

    def _write_and_report(outcome: Outcome, finishing: bool) -> None:
        if session.running:
            session.stop()
        profile = session.profile(exit_code=outcome.exit_code)
        if tracker is not None:
            tracker.uninstall()
            # On SIGTERM do not wait for joblib's idle workers: the process must die now.
            children, unfinished = tracker.collect(shutdown_executors=finishing)
            if children or unfinished:
                from peakline.model.merge import merge_processes
                profile = merge_processes(profile, children, unfinished)
        from peakline.model.profile_file import write_profile
        write_profile(profile, outfile)
        from peakline.reporters import render_outputs
        sys.stdout.flush()
        render_outputs(profile, opts, text_stream=None if opts.no_report else sys.stderr,
                       strict=False)
        print(f"peakline: profile written to {outfile}", file=sys.stderr)

    def on_sigterm(signum, frame):  # noqa: ARG001
        # Unprofiled, SIGTERM kills the process at once (no cleanup runs); we write what was
        # measured, then die by the same signal. A fork child inherits this handler: there it
        # writes the child's own profile (peakline.child).
        runner.sigterm_handler_started(signum)
        if os.getpid() == main_pid:
            if writing:  # the profile is being written: let it finish, then die by signum
                deferred.append(signum)
                return
            write_and_report(Outcome(128 + signum), finishing=False)
        else:
            child.finish_forked_child(128 + signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    on_sigterm._peakline_handler = True  # type: ignore[attr-defined]
    deferred: list[int] = []

    def on_os_exit(status: int) -> None:
        if os.getpid() == main_pid:
            write_and_report(Outcome(status & 0xFF if isinstance(status, int) else 1),
                             finishing=False)

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        runner.install_sigterm_handler(on_sigterm)
    if tracker is not None:
        tracker.install()
    session.start()
    runner.on_os_exit(on_os_exit)
    outcome = runner.run(target)
    runner.remove_os_exit(on_os_exit)
    if os.getpid() != main_pid:
        # A child made by os.fork that returned instead of calling os._exit: it ends like the
        # unprofiled child would, with its own profile handed to the parent.
        outcome.release()
        child.finish_forked_child(outcome.exit_code)
        runner.report_uncaught(outcome)
        runner.finish(outcome)
        return outcome.exit_code
    session.stop()
    outcome.release()
    if opts.gpu and session.gpu_unavailable_reason:
        print(f"peakline: --gpu: nothing measured ({session.gpu_unavailable_reason})",
              file=sys.stderr)
    runner.report_uncaught(outcome)
    write_and_report(outcome)  # a SIGTERM meanwhile is deferred until the profile is written
    if signal.getsignal(signal.SIGTERM) is on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if deferred:
        signal.signal(deferred[0], signal.SIG_DFL)
        os.kill(os.getpid(), deferred[0])
    runner.finish(outcome)
    return outcome.exit_code
