"""`peakline view PROFILE`: render a saved profile file."""

from __future__ import annotations

import argparse
import sys

from peakline.model.profile import read_profile


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="peakline view", description="Show a saved profile file.")
    p.add_argument("profile", help="a profile file written by `peakline run`")
    p.add_argument("--text", action="store_true", help="terminal report (the default)")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.add_argument("--reduced-profile", action="store_true", help="only lines with activity")
    p.add_argument("--cpu-percent-threshold", type=float, default=1.0, metavar="PCT")
    return p


def main(argv: list[str]) -> int:
    try:
        opts = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    profile = read_profile(opts.profile)
    if opts.json:
        from peakline.reporters import json_report
        json_report.render(profile, sys.stdout)
        return 0
    from peakline.reporters import terminal
    terminal.render(profile, sys.stdout, reduced=opts.reduced_profile,
                    cpu_percent_threshold=opts.cpu_percent_threshold)
    return 0
