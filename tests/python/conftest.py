"""Shared fixtures: synthetic raw snapshots (docs/internals-raw-samples.md) and profiles built
from them, so model, builder and reporter tests need neither the C++ core nor a real run; and
the tiny test C extension, built once per session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from peakline.model import FileSelection, build_profile

LIB_DIR = "/usr/lib/python3.11"
MS = 1_000_000  # nanoseconds per millisecond


def _make_raw(frames, stacks, threads=None, **stats):
    """A raw snapshot. ``stacks`` rows: (tid, leaf-first frame ids, py, native, system, wait
    ns, cpu_samples, wait_samples). Threads default to one Python thread per tid seen."""
    if threads is None:
        tids = sorted({row[0] for row in stacks})
        threads = [(tid, True, sum(sum(r[2:5]) for r in stacks if r[0] == tid),
                    sum(r[5] for r in stacks if r[0] == tid)) for tid in tids]
    base = {"cpu_samples": sum(r[6] for r in stacks), "wait_samples": sum(r[7] for r in stacks),
            "dropped_samples": 0, "invalid_frames": 0, "truncated_stacks": 0, "ticks": 0,
            "cpu_interval_ns": 10 * MS, "tick_interval_ns": MS}
    base.update(stats)
    return {"frames": list(frames), "stacks": list(stacks), "threads": list(threads),
            "stats": base}


def _make_meta(**overrides):
    meta = {"program": "app.py", "argv": ["app.py", "--fast"], "python_version": "3.11.7",
            "platform": "linux", "pid": 4242, "started_at": "2024-05-01T12:00:00Z",
            "elapsed_s": 2.5, "exit_code": 0,
            "options": {"cpu_sampling_interval_s": 0.01}}
    meta.update(overrides)
    return meta


@pytest.fixture
def make_raw():
    return _make_raw


@pytest.fixture
def make_meta():
    return _make_meta


@pytest.fixture
def selection():
    """User code only, with a fixed stdlib directory so answers do not depend on the host."""
    return FileSelection(library_dirs=[LIB_DIR])


@pytest.fixture
def build(selection):
    """build(frames, stacks, threads=None, meta=None, selection=None, **stats) -> Profile."""
    def builder(frames, stacks, threads=None, meta=None, selection_=None, **stats):
        return build_profile(_make_raw(frames, stacks, threads, **stats),
                             meta=meta if meta is not None else _make_meta(),
                             selection=selection_ or selection)
    return builder


@pytest.fixture
def app_source(tmp_path):
    """A real user file on disk: line 3 is hot (Python), line 5 calls json (native), line 9
    sleeps (wait), line 11 is cold."""
    path = tmp_path / "app.py"
    path.write_text(
        "import json, time\n"                                   # 1
        "def work(n):\n"                                        # 2
        "    total = sum(i * i for i in range(n))  # HOT\n"     # 3
        "    text = json.dumps(list(range(n)))\n"               # 4
        "    data = json.loads(text)  # NATIVE\n"               # 5
        "    return total, data\n"                              # 6
        "\n"                                                    # 7
        "def main():\n"                                         # 8
        "    time.sleep(0.5)  # WAIT\n"                         # 9
        "    work(10)\n"                                        # 10
        "    print('cold line')  # COLD\n"                      # 11
        "main()\n")                                             # 12
    return str(path)


@pytest.fixture
def app_profile(build, app_source):
    """Sampled: 600 ms Python on 3, 300 ms native (json) via 5, 500 ms wait on 9, 5 ms on
    11 (0.35% of 1.425 s), 20 ms unattributed; 1.425 s sampled in all."""
    frames = [
        (app_source, "<module>", 1, 12),                               # 0
        (app_source, "main", 8, 10),                                   # 1
        (app_source, "work", 2, 3),                                    # 2
        (app_source, "work", 2, 5),                                    # 3
        ("/usr/lib/python3.11/json/decoder.py", "JSONDecoder.decode", 332, 337),  # 4
        (app_source, "main", 8, 9),                                    # 5
        (app_source, "main", 8, 11),                                   # 6
    ]
    stacks = [
        (1, (2, 1, 0), 600 * MS, 0, 0, 0, 60, 0),
        (1, (4, 3, 1, 0), 0, 300 * MS, 0, 0, 30, 0),
        (1, (5, 0), 0, 0, 0, 500 * MS, 0, 50),
        (1, (6, 0), 5 * MS, 0, 0, 0, 1, 0),
        (1, (), 0, 20 * MS, 0, 0, 2, 0),
    ]
    return build(frames, stacks, meta=_make_meta(thread_names={1: "MainThread"}),
                 dropped_samples=7)


@pytest.fixture(scope="session")
def testext_dir(tmp_path_factory):
    """Builds the tiny C extension tests/programs/native_ext/peakline_testext.c with the system
    compiler (no build backend needed); put the directory on PYTHONPATH to import it."""
    out = tmp_path_factory.mktemp("ext")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    src = Path(__file__).resolve().parent.parent / "programs" / "native_ext" / "peakline_testext.c"
    cmd = ["cc", "-shared", "-fPIC", "-O1", f"-I{sysconfig.get_paths()['include']}", str(src),
           "-o", str(out / f"peakline_testext{suffix}")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out


# ---- a real browser, for the HTML tests (report, notebook, server UI, sweep) ----------------
# Debian's chromium driven by Playwright from PyPI (never `playwright install`); one per module.
CHROMIUM = os.environ.get("PEAKLINE_CHROMIUM") or shutil.which("chromium") or \
    shutil.which("chromium-browser") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install playwright)")
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM,
                                              args=["--no-sandbox", "--headless"])
        try:
            yield instance
        finally:
            instance.close()
