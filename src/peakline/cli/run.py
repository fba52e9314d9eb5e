"""`peakline run [options] script.py [args...]` and `peakline run [options] -m module [args...]`."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from peakline.errors import UsageError
from peakline.runner import Outcome, Target
from peakline.session import DEFAULT_CPU_INTERVAL_S, Session, SessionOptions

DESCRIPTION = """\
Run a Python program under peakline. The program runs as __main__ with its own arguments,
stdin and stdout; its exit status is peakline's. The profile file is written when the
program ends — normally, by sys.exit, by an uncaught exception, by Ctrl-C or by SIGTERM —
and a line-level report is printed to stderr."""

# Options that take a value: the command line is split at the first token that is neither
# one of our options nor its value, so the program's own options pass through untouched.
_VALUE_OPTIONS = {"--outfile", "-o", "--cpu-sampling-rate", "--profile-only",
                  "--profile-exclude", "--cpu-percent-threshold", "--memory-sampling-interval",
                  "--malloc-threshold"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="peakline run", description=DESCRIPTION,
        usage="peakline run [options] (script.py | -m module) [args ...]",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a library module as a script")
    p.add_argument("-o", "--outfile", metavar="PATH",
                   help="where to write the profile (default: peakline-<script>.json in the "
                        "current directory)")
    p.add_argument("--cpu-sampling-rate", type=float, default=DEFAULT_CPU_INTERVAL_S,
                   metavar="SECONDS",
                   help="CPU sampling interval in seconds of each thread's CPU time "
                        f"(default: {DEFAULT_CPU_INTERVAL_S})")
    p.add_argument("--profile-all", action="store_true",
                   help="report every file, libraries and the standard library included")
    p.add_argument("--profile-only", metavar="A,B", default="",
                   help="report only files whose path contains one of these substrings")
    p.add_argument("--profile-exclude", metavar="A,B", default="",
                   help="do not report files whose path contains one of these substrings")
    p.add_argument("--cpu-only", action="store_true",
                   help="profile CPU time only: no allocation hooks, no memory or copy columns")
    p.add_argument("--memory-sampling-interval", type=_byte_size, default=512 * 1024,
                   metavar="BYTES",
                   help="mean number of allocated bytes between two memory samples "
                        "(accepts K, M, G suffixes; default: 512K). Smaller is more precise "
                        "per line and slower; allocations much larger than this are "
                        "attributed exactly either way")
    p.add_argument("--no-report", action="store_true", help="write the profile file only")
    p.add_argument("--reduced-profile", action="store_true",
                   help="in the report, show only lines with activity")
    p.add_argument("--cpu-percent-threshold", type=float, default=1.0, metavar="PCT",
                   help="in the report, lines under this share of time are hot-filtered "
                        "(default: 1)")
    return p


def split_command_line(argv: list[str]) -> tuple[list[str], Target | None]:
    """Splits argv into (peakline options, target). Target is None with --help or nothing."""
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
        if tok in _VALUE_OPTIONS:
            if i + 1 >= len(argv):
                raise UsageError(f"{tok} needs a value")
            ours.append(argv[i + 1])
            i += 1
        i += 1
    if i >= len(argv):
        return ours, None
    return ours, Target(script=argv[i], args=argv[i + 1:])


def _byte_size(text: str) -> int:
    units = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = t[-1:] if t[-1:] in units and t[-1:] != "" else ""
    try:
        value = int(float(t[: len(t) - len(suffix)]) * units[suffix])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte size: {text!r}") from None
    if value < 1024:
        raise argparse.ArgumentTypeError(f"must be at least 1K, got {text!r}")
    return value


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
    parser = _parser()
    try:
        opts = parser.parse_args(ours)
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

    options = SessionOptions(
        cpu_sampling_interval_s=opts.cpu_sampling_rate,
        profile_all=opts.profile_all,
        profile_only=_csv(opts.profile_only),
        profile_exclude=_csv(opts.profile_exclude),
        internal_files=(os.path.abspath(sys.argv[0]),) if sys.argv and sys.argv[0] else (),
        memory=not opts.cpu_only,
        memory_sampling_interval_bytes=opts.memory_sampling_interval,
    )
    outfile = os.path.abspath(opts.outfile or default_outfile(target))
    return _profile_and_run(target, options, outfile, opts)


def _profile_and_run(target: Target, options: SessionOptions, outfile: str, opts) -> int:
    from peakline import runner

    session = Session(options, program=target.display, argv=[target.display, *target.args])

    def write_and_report(outcome: Outcome) -> None:
        if session.running:
            session.stop()
        profile = session.profile(exit_code=outcome.exit_code)
        from peakline.model.profile import write_profile
        write_profile(profile, outfile)
        if not opts.no_report:
            from peakline.reporters import terminal
            sys.stdout.flush()
            terminal.render(profile, sys.stderr, reduced=opts.reduced_profile,
                            cpu_percent_threshold=opts.cpu_percent_threshold)
        print(f"peakline: profile written to {outfile}", file=sys.stderr)

    def on_sigterm(signum, frame):  # noqa: ARG001
        # Unprofiled, SIGTERM kills the process at once (no cleanup runs); we write what was
        # measured, then die by the same signal.
        write_and_report(Outcome(128 + signum))
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, on_sigterm)
    session.start()
    outcome = runner.run(target)
    if signal.getsignal(signal.SIGTERM) is on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    session.stop()
    outcome.release()
    runner.report_uncaught(outcome)
    write_and_report(outcome)
    runner.finish(outcome)
    return outcome.exit_code
