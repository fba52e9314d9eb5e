"""`peakline push --server URL --model NAME --version V [--token T] PROFILE.json`: upload a
profile to a validation server (`peakline serve`, docs/server.md) and print its verdict.

The upload is one gzip-compressed JSON object: the profile, the source text of the files it
names (so the server shows a full report without ever opening a path it was sent), where it
ran (program, git commit, machine, Python, installed packages) and ``upload_id``, a random
id that makes retries safe: a push retried after a lost answer is stored once. Only the
standard library is used, so pushing needs no ``server`` extra.

Exit status: 0 when the server's verdict is pass, 5 when it is fail, 2 for a bad command
line, 3 for a bad profile, 6 when the server refused the upload or could not be reached.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

from peakline.errors import PeaklineError, UsageError
from peakline.gates.budgets import EXIT_OVER_BUDGET
from peakline.model.profile import Profile

MAX_SOURCE_FILE_BYTES = 2 << 20
MAX_SOURCES_BYTES = 16 << 20
ATTEMPTS = 4
TIMEOUT_S = 120.0


class PushError(PeaklineError):
    """The server refused the upload or could not be reached."""

    exit_code = 6


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="peakline push",
        description="Upload a profile to a peakline validation server (peakline serve) and "
                    "print its verdict. Exit status: 0 pass, 5 fail, 2 bad command line, 3 bad "
                    "profile, 6 server refused or unreachable.")
    add_server_options(parser, server_flag="--server")
    parser.add_argument("profile", metavar="PROFILE.json")
    return parser


def add_server_options(parser: argparse.ArgumentParser, *, server_flag: str) -> None:
    parser.add_argument(server_flag, dest="server", metavar="URL", required=True,
                        help="the server, e.g. http://peakline.example:8765")
    parser.add_argument("--model", required=True, help="the model's name on the server")
    parser.add_argument("--version", dest="model_version", metavar="V", required=True,
                        help="the model's version (e.g. a release or a git commit)")
    parser.add_argument("--token", default=None,
                        help="write token (default: $PEAKLINE_TOKEN)")


def main(argv: list[str]) -> int:
    parser = build_parser()
    parser.error = lambda message: (_ for _ in ()).throw(  # type: ignore[method-assign]
        UsageError(f"{message} (see `peakline push --help`)"))
    try:
        opts = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from peakline.model.profile_file import read_profile

    profile = read_profile(opts.profile)
    answer = push(profile, server=opts.server, model=opts.model, version=opts.model_version,
                  token=opts.token)
    sys.stdout.write(render_answer(answer, opts.server))
    return 0 if answer["verdict"] == "pass" else EXIT_OVER_BUDGET


def token_from(given: str | None) -> str:
    token = given or os.environ.get("PEAKLINE_TOKEN", "")
    if not token.strip():
        raise UsageError("no token: give --token or set PEAKLINE_TOKEN (create one on the "
                         "server with `peakline serve token create NAME`)")
    return token.strip()


def push(profile: Profile, *, server: str, model: str, version: str, token: str | None
         ) -> dict[str, Any]:
    """Upload ``profile``; the server's answer (verdict, figures, budgets, reasons, run)."""
    token = token_from(token)
    url = _api_url(server, "/api/runs")
    envelope = {"upload_id": uuid.uuid4().hex, "model": model, "version": version,
                "metadata": run_metadata(profile), "sources": sources_of(profile),
                "profile": profile.to_dict()}
    body = gzip.compress(json.dumps(envelope, separators=(",", ":"), allow_nan=False)
                         .encode("utf-8"), 6)
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Content-Encoding": "gzip",
        "Authorization": f"Bearer {token}", "User-Agent": "peakline-push"})
    for attempt in range(ATTEMPTS):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            if error.code < 500 or attempt == ATTEMPTS - 1:
                raise PushError(f"{url}: {error.code} {_error_text(error)}") from None
        except (urllib.error.URLError, OSError) as error:
            # the same upload_id again: if the first attempt was stored, it is not stored twice
            if attempt == ATTEMPTS - 1:
                reason = getattr(error, "reason", error)
                raise PushError(f"{url}: cannot reach the server: {reason}") from None
        time.sleep(0.5 * 2 ** attempt)
    raise AssertionError("unreachable")


def _api_url(server: str, path: str) -> str:
    parts = urllib.parse.urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--server {server!r}: expected http://HOST:PORT or https://...")
    return server.rstrip("/") + path


def _error_text(error: urllib.error.HTTPError) -> str:
    try:
        return json.loads(error.read()).get("error", error.reason)
    except (ValueError, AttributeError, OSError):
        return str(error.reason)


def render_answer(answer: dict[str, Any], server: str) -> str:
    lines = [f"{answer['model']} {answer['version']}: {answer['verdict'].upper()} "
             f"(run #{answer['run_id']}, {server.rstrip('/')}/runs/{answer['run_id']})"]
    if answer.get("baseline"):
        lines.append(f"  compared with the previous passing version "
                     f"{answer['baseline']['version']}")
    lines.extend(f"  {note}" for note in answer.get("notes") or ())
    lines.extend(f"  FAIL {reason}" for reason in answer.get("reasons") or ())
    return "\n".join(lines) + "\n"


# ---- what travels with the profile ----------------------------------------------------------

def sources_of(profile: Profile) -> dict[str, str]:
    """Source text of the profiled files that are still on disk (each at most 2 MiB, 16 MiB
    in all)."""
    out, total = {}, 0
    for filename in profile.files:
        if filename.startswith("<"):
            continue
        try:
            if os.path.getsize(filename) > MAX_SOURCE_FILE_BYTES:
                continue
            with open(filename, encoding="utf-8", errors="replace") as stream:
                text = stream.read()
        except OSError:
            continue
        if total + len(text) > MAX_SOURCES_BYTES:
            break
        out[filename] = text
        total += len(text)
    return out


def run_metadata(profile: Profile) -> dict[str, Any]:
    """Where the run was made: the program, git commit of the current directory (if any), the
    machine, the profiled Python and the packages installed beside peakline."""
    from importlib import metadata

    packages = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            packages[name] = dist.version
    return {"program": profile.program, "git_commit": _git_commit(),
            "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{_memory_text()})",
            "python": profile.python_version, "platform": profile.platform,
            "packages": dict(sorted(packages.items()))}


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def _memory_text() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return "memory unknown"
    from peakline.reporters._format import human_bytes
    return f"{human_bytes(pages * size)} memory"
