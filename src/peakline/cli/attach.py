"""`peakline attach PID [--duration SECONDS] [--live] [--cpu-only] [--outfile P.json] ...`:
profile a running CPython process that peakline did not start, then leave it running as
before (peakline.attach; docs/long-running.md, "Attach" and "Live view")."""

from __future__ import annotations

import os
import sys
import time

from peakline import run_options
from peakline.cli import options as _options

DESCRIPTION = """\
Attach to a running CPython process (3.10-3.13 through ptrace, 3.14+ through sys.remote_exec),
profile it for --duration seconds or until Ctrl-C (or until it exits), detach and write the
profile. The process keeps running as before. Memory figures count from the attach moment.
Needs permission to trace the process (same user, or root / CAP_SYS_PTRACE)."""


def _seconds(text: str) -> float:
    value = float(text)
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"must be a positive number of seconds, got {text!r}")
    return value


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"not a process id: {text!r}")
    return int(text)


# What the attached session measures: `peakline run`'s options (peakline/run_options.py);
# the process's children are its own business (it was not started by peakline).
SESSION_OPTIONS = run_options.cli_options("outfile", "cpu_sampling_rate", "profile_all",
                                          "profile_only", "profile_exclude", "cpu_only",
                                          "memory_sampling_interval", "gpu")


def build_parser():
    opts = [
        _options.Option("--duration", dest="duration", convert=_seconds, metavar="SECONDS",
                        help="profile this long, then detach (default: until Ctrl-C or the "
                             "process exits)"),
        *SESSION_OPTIONS,
        _options.Option("--attach-timeout", dest="attach_timeout", convert=_seconds,
                        metavar="SECONDS", default=10.0,
                        help="how long the process's main thread may take to run peakline's "
                             "start-up code (default 10)"),
        _options.Option("--live", dest="live", convert=None, const=True, default=False,
                        help="show a live view of the profile in this terminal while attached "
                             "(q detaches and writes the profile; the process runs on)"),
        _options.Option("--no-report", dest="no_report", convert=None, const=True, default=False,
                        help="write the profile, skip the terminal table"),
    ] + _options.output_options(_options.RUN)
    parser = _options.build_parser(opts, prog="peakline attach", description=DESCRIPTION)
    parser.add_argument("pid", type=_pid, help="the process to profile")
    return parser


def main(argv: list[str]) -> int:
    try:
        opts = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from peakline.attach import profile_for
    from peakline.model.profile_file import write_profile
    from peakline.reporters import check_output_path, check_outputs, render_outputs

    run_options.check_command_line(opts, SESSION_OPTIONS)
    outfile = os.path.abspath(opts.outfile or f"peakline-attach-{opts.pid}.json")
    check_output_path("--outfile", outfile)
    check_outputs(opts)
    if opts.live:
        from peakline.live.app import check_terminal
        check_terminal()
    options = run_options.session_options(opts)

    def attached(attachment) -> None:
        how = "until Ctrl-C" if opts.duration is None else f"for {opts.duration:g} s"
        if opts.live:
            how = ("until q in the live view" if opts.duration is None
                   else f"for {opts.duration:g} s or until q in the live view")
        print(f"peakline: attached to process {opts.pid} ({attachment.mode}); profiling {how}",
              file=sys.stderr, flush=True)

    if opts.live:
        profile = _profile_live(opts, options, on_attached=attached)
    else:
        profile = profile_for(opts.pid, opts.duration, options,
                              start_timeout_s=opts.attach_timeout, on_attached=attached)
    write_profile(profile, outfile)
    print(f"peakline: detached; profile written to {outfile}"
          + (" (the process exited while attached)"
             if profile.attached["process_exited"] else ""),
          file=sys.stderr)
    if profile.attached.get("detach_problem"):
        print(f"peakline: warning: process {opts.pid}: {profile.attached['detach_problem']}",
              file=sys.stderr)
    warning = profile.sampling.warning
    if warning:
        print(f"peakline: warning: {warning}", file=sys.stderr)
    render_outputs(profile, opts, text_stream=None if opts.no_report else sys.stdout)
    return 0


def _profile_live(opts, options, *, on_attached):
    """--live: attach, show the view until q (detach), the process's exit or --duration, then
    the profile, as a plain attach would have it. Ctrl-C, or the view failing, detaches too."""
    from peakline.attach import Attachment
    from peakline.live.app import attach_live

    attachment = Attachment.attach(opts.pid, options, start_timeout_s=opts.attach_timeout)
    try:
        on_attached(attachment)
        deadline = None if opts.duration is None else time.monotonic() + opts.duration
        source = None
        try:
            source = attach_live(attachment, f"pid {opts.pid} · {_command_line(opts.pid)}",
                                 deadline=deadline)
        except KeyboardInterrupt:
            pass
        except Exception as error:  # noqa: BLE001 - the profile is still worth having
            print(f"peakline: the live view failed: {type(error).__name__}: {error}",
                  file=sys.stderr)
        if source is not None and source.error is not None:
            raise source.error
        if source is not None and source.final is not None:
            if source.stopped_by_view:
                print("peakline: live view closed: detached from the process, which runs on",
                      file=sys.stderr)
            return source.final
        return attachment.detach()
    finally:
        attachment.close()


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = cmdline.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return "?"
    return " ".join(w.decode("utf-8", "replace") for w in words)[:200] or "?"
