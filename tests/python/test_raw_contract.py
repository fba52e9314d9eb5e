"""The C++ -> Python hand-off (docs/internals-raw-samples.md) is declared once on each side: the
core's columns in bindings/core_module.cc, the Python rows and counters in peakline.model.raw.
These tests hold the two sides equal, on the declarations and on a real session's data, and the
contract's page equal to both."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from peakline.model import raw

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "internals-raw-samples.md"
FAKE_NVML_SOURCE = ROOT / "tests" / "native" / "fake_nvml" / "fake_nvml.c"
ALL_ROWS = (*raw.CORE_ROWS, raw.TorchLine)


def test_the_core_exports_the_field_names_the_model_reads_by():
    from peakline import _core

    assert _core.raw_fields() == {row.__name__: row._fields for row in raw.CORE_ROWS}


# A session in its own process (one per process): memory and a stand-in NVML on, a thread, a
# snapshot of the running session, then the final data.
SESSION = textwrap.dedent("""\
    import json, sys, threading, time
    from peakline.session import Session, SessionOptions

    def work(n):
        keep = [bytearray(100_000) for _ in range(n)]
        return sum(i * i for i in range(300_000)), len(keep)

    session = Session(SessionOptions(memory=True, gpu=True))
    session.start()
    work(30)
    thread = threading.Thread(target=work, args=(10,))
    thread.start()
    thread.join()
    # A snapshot taken while the tick thread is half-way through a tick (suspended in a
    # Python callback, the GIL let go) skips its catch-up and holds what was finished before:
    # once in CI, no stack yet. The contract is about rows, so take one that has them.
    for _ in range(50):
        running = session.snapshot_raw()
        if running["stacks"] and running["memory"]["lines"]:
            break
        time.sleep(0.02)
    work(30)
    session.stop()
    json.dump({"running": running, "final": session._raw}, sys.stdout)
""")


@pytest.fixture(scope="module")
def session_data(tmp_path_factory) -> dict:
    env = dict(os.environ)
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is not None:  # the GPU part needs a device: NVML's stand-in (tests/native/fake_nvml)
        lib = tmp_path_factory.mktemp("fake_nvml") / "libfake_nvml.so"
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(FAKE_NVML_SOURCE),
                        "-lpthread"], check=True)
        env.update(PEAKLINE_NVML_LIBRARY=str(lib), FAKE_NVML_UTIL="90")
    program = tmp_path_factory.mktemp("session") / "session_program.py"  # a reported file
    program.write_text(SESSION)
    proc = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=program.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _rows(data: dict) -> dict[type, list]:
    """Every row of a snapshot, by its declared kind."""
    memory, gpu = data.get("memory") or {}, data.get("gpu") or {}
    return {
        raw.Frame: data["frames"], raw.Stack: data["stacks"], raw.Thread: data["threads"],
        raw.ActivityBucket: data["activity"]["buckets"], raw.MemoryStack: memory["stacks"],
        raw.MemoryLine: memory["lines"],
        raw.TimePoint: memory["timeline"] + [p for line in memory["lines"] for p in line[4]],
        raw.GpuStack: gpu.get("stacks", []), raw.GpuError: gpu.get("errors", []),
    }


@pytest.mark.parametrize("which", ["running", "final"])
def test_every_row_a_session_sends_has_the_declared_fields(session_data, which):
    data = session_data[which]
    for kind, rows in _rows(data).items():
        assert all(len(row) == len(kind._fields) for row in rows), kind.__name__
    for kind in (raw.Frame, raw.Stack, raw.Thread, raw.MemoryStack, raw.MemoryLine,
                 raw.TimePoint):
        assert _rows(data)[kind], f"no {kind.__name__} rows to check"
    # Parallel tables: the memory (and measured GPU) figures of stack i are row i.
    assert len(data["memory"]["stacks"]) == len(data["stacks"])
    if data.get("gpu", {}).get("measured"):
        assert len(data["gpu"]["stacks"]) == len(data["stacks"])
    # Read by name, the rows mean what the contract says.
    frames = [raw.Frame(*row) for row in data["frames"]]
    stacks = [raw.Stack(*row) for row in data["stacks"]]
    assert all(0 <= i < len(frames) for s in stacks for i in s.frames)
    assert any(f.function == "work" for f in frames)
    assert sum(raw.Thread(*row).cpu_ns for row in data["threads"]) > 0
    memory = [raw.MemoryStack(*row) for row in data["memory"]["stacks"]]
    assert sum(m.alloc_python_bytes + m.alloc_native_bytes for m in memory) >= 1_000_000


@pytest.mark.parametrize("which", ["running", "final"])
def test_a_session_sends_exactly_the_declared_counters(session_data, which):
    data = session_data[which]
    assert set(data["stats"]) == set(raw.CPU_STATS) | set(raw.SESSION_STATS)
    assert set(data["memory"]["stats"]) == set(raw.MEMORY_STATS)
    if "gpu" in data:
        assert set(data["gpu"]["stats"]) == set(raw.GPU_STATS)


def _sections(text: str) -> dict[str, str]:
    """``### `name` `` heading -> the text up to the next heading."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^### `([^`]+)`\n(.*?)(?=^##|\Z)", text, re.M | re.S)}


def test_the_contract_page_lists_every_row_field_in_order():
    text = DOC.read_text()
    sections = _sections(text)
    for kind in ALL_ROWS:
        assert f"{kind.__name__} = ({', '.join(kind._fields)})" in text, kind.__name__
        table = re.findall(r"^\| `([^`]+)` \|", sections[kind.__name__], re.M)
        assert table == list(kind._fields), kind.__name__


def test_the_contract_page_lists_every_counter_with_its_declared_meaning():
    sections = _sections(DOC.read_text())
    for heading, counters in (('raw["stats"]', {**raw.CPU_STATS, **raw.SESSION_STATS}),
                              ('raw["memory"]["stats"]', raw.MEMORY_STATS),
                              ('raw["gpu"]["stats"]', raw.GPU_STATS)):
        table = re.findall(r"^\| `([^`]+)` \| (.*) \|$", sections[heading], re.M)
        assert table == list(counters.items()), heading
