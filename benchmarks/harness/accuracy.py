"""Accuracy: each tool's error on calibration programs whose answers are known.

The programs (benchmarks/calibration/*.py) measure their own truth while they run (phase wall
times, each thread's CPU time, object sizes) and write it to $PEAKLINE_CALIBRATION_TRUTH; each
tool's figure is read from the file the tool wrote, by the readers below. Quantities:

    peak        peak memory of the run (peak.py: 512 MiB array + 16 MiB of small objects)
    alloc_line  bytes allocated on each marked line (lines.py: 100 MiB, 300 MiB, ~48 MiB of
                small objects, a 64 MiB temporary)
    peak_line   bytes each marked line holds at the peak (the temporary: 0)
    func_time   share of the run's time in each of python_phase / native_phase / wait_phase
                (split.py; each phase ~1/3 of the wall time)
    category    the run's Python / native / waiting split (split.py; same truth)
    threads     CPU shares of three threads doing work in the ratio 4:2:1 (threads.py)

Errors: relative (|reported - truth| / truth) for byte quantities, the largest over the marked
lines for per-line ones; percentage points (the largest |share - true share| over the parts)
for shares. A tool that does not report a quantity gets None ("n/a"), a tool that failed or
whose output lacks the figure gets the reason as a string.

How each tool's number is read (also printed under the table in docs/benchmarks.md):
READING below.
"""

from __future__ import annotations

import ast
import json
import os
import re
import pathlib
import shutil
import subprocess
import sys
import tempfile

from . import timing

CALIBRATION_DIR = pathlib.Path(__file__).resolve().parent.parent / "calibration"
MIB = 1024 * 1024

# program -> (knob argv[1] for full runs, for smoke runs, quantities it calibrates)
PROGRAMS = {
    "peak": ("1.0", "0.1", ("peak",)),
    "lines": ("0.5", "0.1", ("alloc_line", "peak_line")),
    "split": ("1.0", "0.3", ("func_time", "category")),
    "threads": ("1.0", "0.2", ("threads",)),
}
QUANTITIES = {
    "peak": "Peak memory (rel. error)",
    "alloc_line": "Allocated per line (worst rel. error)",
    "peak_line": "Held at peak per line (worst rel. error)",
    "func_time": "Time per function (worst error, pp)",
    "category": "Python/native/wait split (worst error, pp)",
    "threads": "Thread CPU shares 4:2:1 (worst error, pp)",
}
# Which quantities each tool reports; the others are "n/a" and its runs are skipped.
REPORTS = {
    "peakline": set(QUANTITIES),
    "scalene": {"peak", "alloc_line", "peak_line", "func_time", "category", "threads"},
    "memray": {"peak", "alloc_line", "peak_line"},
    "fil": {"peak", "peak_line"},
    "py-spy": {"func_time", "threads"},
    "pyinstrument": {"func_time"},
}
READING = {
    "peakline": "`peakline run --no-report -o p.json` (full mode, defaults). peak: `peak_bytes`. "
                "Per line: `alloc_python_bytes + alloc_native_bytes` and `live_at_peak_bytes` of "
                "the marked line. Time per function: `inclusive_s` of each phase function "
                "(CPU + wait). Split: `totals` — python = `cpu_python_s`, native = "
                "`cpu_native_s + cpu_system_s`, wait = `wait_s`. Threads: `threads[].cpu_s` by "
                "thread name.",
    "scalene": "`scalene run -o s.json` (full mode: CPU + memory). peak: `max_footprint_mb`. "
               "Per line: `n_malloc_mb` (allocated) and `n_peak_mb` (its per-line peak) of the "
               "marked line. Time per function and threads: the sum of "
               "`n_cpu_percent_python + n_cpu_percent_c + n_sys_percent` over the function's "
               "lines, as shares of the three functions. Split: python = Σ python %, native = "
               "Σ (c % + sys %), wait = 100 % − both (Scalene's percentages are of elapsed time).",
    "memray": "`memray run -o m.bin`. peak: `FileReader(m.bin).metadata.peak_memory`. Allocated "
              "per line: every allocation record of `FileReader.get_allocation_records()` (frees "
              "and munmaps left out) summed by the innermost frame in the program's file. "
              "Held at peak: `FileReader.get_high_watermark_allocation_records()` summed "
              "by the innermost frame in the program's file.",
    "fil": "`fil-profile -o DIR run` (Fil reports only the peak). peak: the sum of "
           "`peak-memory.prof` (folded stacks → bytes live at the peak). Held at peak per "
           "line: those bytes summed by the innermost frame in the program's file.",
    "py-spy": "`py-spy record --format raw` (100 Hz; `--idle` for split.py so the sleep is "
              "sampled, default — on-CPU only — for threads.py). Shares: samples whose stack "
              "holds the phase / worker function.",
    "pyinstrument": "`pyinstrument -r json` (wall clock, 1 ms; it samples the thread it runs "
                    "in, so thread shares are n/a). Time per function: `time` of the phase "
                    "function's node under `<module>`.",
}


def _py_spy_args(program):
    return ["--idle"] if program == "split" else []


def command(tool: str, env, script: pathlib.Path, knob: str, out: pathlib.Path,
            program: str) -> list[str]:
    """argv that runs `script knob` under `tool`, writing its output at/under `out`."""
    bin_dir = env.bin_dir
    if tool == "peakline":
        return [env.python, "-m", "peakline", "run", "--no-report", "-o", str(out), str(script),
                knob]
    if tool == "scalene":
        return [str(bin_dir / "scalene"), "run", "-o", str(out), str(script), "---", knob]
    if tool == "memray":
        return [str(bin_dir / "memray"), "run", "-f", "-q", "-o", str(out), str(script), knob]
    if tool == "fil":
        return [str(bin_dir / "fil-profile"), "-o", str(out), "--no-browser", "run",
                str(script), knob]
    if tool == "py-spy":
        return [str(bin_dir / "py-spy"), "record", "--format", "raw", *_py_spy_args(program),
                "-o", str(out), "--", env.python, str(script), knob]
    if tool == "pyinstrument":
        return [str(bin_dir / "pyinstrument"), "-r", "json", "-o", str(out), str(script), knob]
    raise ValueError(tool)


# ---------------------------------------------------------------- source facts (truth side)

def marked_lines(script: pathlib.Path) -> dict[str, int]:
    """`# LINE:X` markers -> line numbers."""
    found = {}
    for number, text in enumerate(script.read_text().splitlines(), start=1):
        match = re.search(r"#\s*LINE:([A-Z])\s*$", text)
        if match:
            found[match.group(1)] = number
    return found


def function_spans(script: pathlib.Path) -> dict[str, tuple[int, int]]:
    """Top-level function name -> (first line, last line)."""
    tree = ast.parse(script.read_text())
    return {node.name: (node.lineno, node.end_lineno) for node in tree.body
            if isinstance(node, ast.FunctionDef)}


PHASES = {"python": "python_phase", "native": "native_phase", "wait": "wait_phase"}
WORKERS = ("work_4", "work_2", "work_1")


# ---------------------------------------------------------------- readers (tool side)

def _same_file(name: str, script: pathlib.Path) -> bool:
    return name == str(script) or os.path.basename(name) == script.name


def _shares(values: dict[str, float]) -> dict[str, float] | None:
    total = sum(values.values())
    return {k: v / total for k, v in values.items()} if total > 0 else None


def read_peakline(out: pathlib.Path, program: str, script: pathlib.Path) -> dict:
    data = json.loads(out.read_text())
    fig: dict = {}
    files = {name: f for name, f in data.get("files", {}).items() if _same_file(name, script)}
    lines = {l["lineno"]: l for f in files.values() for l in f.get("lines", [])}
    functions = {fn["name"]: fn for f in files.values() for fn in f.get("functions", [])}
    if program == "peak":
        fig["peak"] = data.get("peak_bytes")
    elif program == "lines":
        marks = marked_lines(script)
        fig["alloc_line"] = {k: (lines[n].get("alloc_python_bytes", 0)
                                 + lines[n].get("alloc_native_bytes", 0)) if n in lines else 0
                             for k, n in marks.items()}
        fig["peak_line"] = {k: lines[n].get("live_at_peak_bytes", 0) if n in lines else 0
                            for k, n in marks.items()}
    elif program == "split":
        fig["func_time"] = _shares({k: functions[f]["inclusive_s"] if f in functions else 0.0
                                    for k, f in PHASES.items()})
        t = data["totals"]
        fig["category"] = _shares({"python": t["cpu_python_s"],
                                   "native": t["cpu_native_s"] + t["cpu_system_s"],
                                   "wait": t["wait_s"]})
    elif program == "threads":
        by_name = {t.get("name"): t["cpu_s"] for t in data.get("threads", [])}
        fig["threads"] = _shares({w: by_name.get(w, 0.0) for w in WORKERS})
    return fig


def read_scalene(out: pathlib.Path, program: str, script: pathlib.Path) -> dict:
    data = json.loads(out.read_text())
    fig: dict = {}
    lines = {}
    for name, f in data.get("files", {}).items():
        if _same_file(name, script):
            lines.update({l["lineno"]: l for l in f.get("lines", [])})

    def cpu(line):
        return (line["n_cpu_percent_python"] + line["n_cpu_percent_c"]
                + line["n_sys_percent"])

    def per_function(names):
        spans = function_spans(script)
        return {key: sum(cpu(l) for n, l in lines.items()
                         if spans[f][0] <= n <= spans[f][1]) for key, f in names.items()}

    if program == "peak":
        if "max_footprint_mb" in data:
            fig["peak"] = data["max_footprint_mb"] * MIB
    elif program == "lines":
        marks = marked_lines(script)
        fig["alloc_line"] = {k: lines[n]["n_malloc_mb"] * MIB if n in lines else 0
                             for k, n in marks.items()}
        fig["peak_line"] = {k: lines[n]["n_peak_mb"] * MIB if n in lines else 0
                            for k, n in marks.items()}
    elif program == "split":
        fig["func_time"] = _shares(per_function(PHASES))
        python = sum(l["n_cpu_percent_python"] for l in lines.values()) / 100
        native = sum(l["n_cpu_percent_c"] + l["n_sys_percent"] for l in lines.values()) / 100
        fig["category"] = {"python": python, "native": native,
                           "wait": max(0.0, 1.0 - python - native)}
    elif program == "threads":
        fig["threads"] = _shares(per_function({w: w for w in WORKERS}))
    return fig


def read_memray(out: pathlib.Path, program: str, script: pathlib.Path, env) -> dict:
    # memray's reader needs memray: run a tiny reader in the benchmark interpreter.
    code = r"""
import json, os, subprocess, sys
import memray
path, script = sys.argv[1], sys.argv[2]
reader = memray.FileReader(path)
held = {}
for record in reader.get_high_watermark_allocation_records(merge_threads=True):
    for function, filename, lineno in record.stack_trace():
        if os.path.basename(filename) == os.path.basename(script):
            held[lineno] = held.get(lineno, 0) + record.size
            break
allocated = {}
released = {memray.AllocatorType.FREE, memray.AllocatorType.MUNMAP}
for record in reader.get_allocation_records():
    if record.allocator in released:
        continue
    for function, filename, lineno in record.stack_trace():
        if os.path.basename(filename) == os.path.basename(script):
            allocated[lineno] = allocated.get(lineno, 0) + record.size
            break
print(json.dumps({"peak": reader.metadata.peak_memory, "held": held, "allocated": allocated}))
"""
    done = subprocess.run([env.python, "-c", code, str(out), str(script)], capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-500:])
    raw = json.loads(done.stdout)
    fig: dict = {}
    if program == "peak":
        fig["peak"] = raw["peak"]
    elif program == "lines":
        marks = marked_lines(script)
        fig["peak_line"] = {k: raw["held"].get(str(n), 0) for k, n in marks.items()}
        fig["alloc_line"] = {k: raw["allocated"].get(str(n), 0) for k, n in marks.items()}
    return fig


def read_fil(out: pathlib.Path, program: str, script: pathlib.Path) -> dict:
    profiles = sorted(out.rglob("peak-memory.prof"))
    if not profiles:
        raise RuntimeError("no peak-memory.prof written")
    total, held = 0, {}
    for text in profiles[-1].read_text().splitlines():
        stack, _, count = text.rpartition(" ")
        size = int(count)
        total += size
        for frame in reversed(stack.split(";")):  # innermost last in the folded stack
            location = frame.split(" (")[0]
            filename, _, lineno = location.rpartition(":")
            if os.path.basename(filename) == script.name:
                held[int(lineno)] = held.get(int(lineno), 0) + size
                break
    fig: dict = {}
    if program == "peak":
        fig["peak"] = total
    elif program == "lines":
        fig["peak_line"] = {k: held.get(n, 0) for k, n in marked_lines(script).items()}
    return fig


def read_py_spy(out: pathlib.Path, program: str, script: pathlib.Path) -> dict:
    targets = PHASES if program == "split" else {w: w for w in WORKERS}
    counts = {k: 0 for k in targets}
    for text in out.read_text().splitlines():
        stack, _, count = text.rpartition(" ")
        functions = [frame.split(" (")[0] for frame in stack.split(";")]
        for key, name in targets.items():
            if name in functions:
                counts[key] += int(count)
                break
    shares = _shares(counts)
    return {"func_time": shares} if program == "split" else {"threads": shares}


def read_pyinstrument(out: pathlib.Path, program: str, script: pathlib.Path) -> dict:
    data = json.loads(out.read_text())
    times = {k: 0.0 for k in PHASES}

    def walk(node):
        for key, name in PHASES.items():
            if node.get("function") == name and _same_file(node.get("file_path", ""), script):
                times[key] += node.get("time", 0.0)
                return
        for child in node.get("children", []):
            walk(child)

    walk(data["root_frame"])
    return {"func_time": _shares(times)} if program == "split" else {}


def read(tool, out, program, script, env) -> dict:
    if tool == "peakline":
        return read_peakline(out, program, script)
    if tool == "scalene":
        return read_scalene(out, program, script)
    if tool == "memray":
        return read_memray(out, program, script, env)
    if tool == "fil":
        return read_fil(out, program, script)
    if tool == "py-spy":
        return read_py_spy(out, program, script)
    if tool == "pyinstrument":
        return read_pyinstrument(out, program, script)
    raise ValueError(tool)


# ---------------------------------------------------------------- errors

def truth_for(quantity: str, truth: dict):
    return {
        "peak": lambda: truth["peak_bytes"],
        "alloc_line": lambda: truth["alloc_bytes"],
        "peak_line": lambda: {k: v for k, v in truth["live_at_peak_bytes"].items() if v},
        "func_time": lambda: truth["share"],
        "category": lambda: truth["share"],
        "threads": lambda: truth["share"],
    }[quantity]()


def error(quantity: str, reported, true) -> float | None:
    """Relative error for bytes (worst line), percentage points for shares (worst part)."""
    if reported is None:
        return None
    if quantity == "peak":
        return abs(reported - true) / true
    if quantity in ("alloc_line", "peak_line"):
        return max(abs(reported.get(k, 0) - v) / v for k, v in true.items() if v)
    return 100 * max(abs(reported.get(k, 0.0) - v) for k, v in true.items())


# ---------------------------------------------------------------- runner

def _log(message):
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def measure(env, tools: list[str], *, smoke: bool = False, timeout_s: float = 300.0) -> dict:
    """Runs every calibration program under every tool that reports one of its quantities.

    Returns {"results": {tool: {quantity: {"reported", "truth", "error"} | {"failed"}}},
             "reading": READING subset, "programs": {...}}.
    """
    results: dict[str, dict] = {tool: {} for tool in tools}
    truths: dict[str, dict] = {}
    for program, (knob_full, knob_smoke, quantities) in PROGRAMS.items():
        script = CALIBRATION_DIR / f"{program}.py"
        knob = knob_smoke if smoke else knob_full
        for tool in tools:
            wanted = [q for q in quantities if q in REPORTS.get(tool, ())]
            if not wanted:
                continue
            scratch = pathlib.Path(tempfile.mkdtemp(prefix="peakline-accuracy-"))
            try:
                # Scalene insists on a .json name; the others take what they are given.
                out = scratch / {"fil": "fil-out", "memray": "memray.bin",
                                 "py-spy": "py-spy.txt"}.get(tool, f"{tool}.json")
                truth_path = scratch / "truth.json"
                environ = {**os.environ, "PEAKLINE_CALIBRATION_TRUTH": str(truth_path),
                           "PYTHONPATH": str(CALIBRATION_DIR)}
                argv = command(tool, env, script, knob, out, program)
                wall, code, rss, tail = timing._run_once(
                    argv, scratch, timeout_s, env=environ,
                    memory_limit_kb=timing.CAPPED_RSS_LIMIT_KB)
                failure = None
                if code == -9 and wall >= timeout_s * 0.99:
                    failure = f"killed after {timeout_s:.0f} s (time limit)"
                elif code == -9 and rss >= timing.CAPPED_RSS_LIMIT_KB * 0.9:
                    failure = f"killed at {rss / 2**20:.1f} GiB resident (memory limit)"
                elif code:
                    failure = f"exit {code}: {' '.join(tail.split())[-300:]}"
                figures = {}
                if failure is None:
                    try:
                        truth = json.loads(truth_path.read_text())
                        truths.setdefault(program, truth)
                        figures = read(tool, out, program, script, env)
                    except Exception as problem:  # a reader bug must not sink the run
                        failure = f"could not read the output: {problem!r}"[:300]
                for quantity in wanted:
                    if failure:
                        results[tool][quantity] = {"failed": failure}
                        continue
                    reported, true = figures.get(quantity), truth_for(quantity, truth)
                    results[tool][quantity] = {"reported": reported, "truth": true,
                                               "error": error(quantity, reported, true)}
                _log(f"accuracy {program:<8} {tool:<13} "
                     + (failure or ", ".join(
                         f"{q} {_fmt_error(q, results[tool][q]['error'])}" for q in wanted)))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    return {"results": results, "truths": truths,
            "reading": {t: READING[t] for t in tools if t in READING},
            "knobs": {p: (k[1] if smoke else k[0]) for p, k in PROGRAMS.items()}}


def _fmt_error(quantity: str, value) -> str:
    if value is None:
        return "-"
    if quantity in ("peak", "alloc_line", "peak_line"):
        return f"{100 * value:.1f}%"
    return f"{value:.1f} pp"
