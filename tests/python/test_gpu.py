"""GPU profiling without a GPU: `peakline run` against a stand-in NVML library
(tests/native/fake_nvml/fake_nvml.c, compiled here) and a stand-in torch (tests/python/fake_torch).

The target scripts drive the fake NVML through ctypes (the same library file, so the same
state as the poller's), which makes the truth exact: the GPU is 80% busy exactly while one
line sleeps for 1 s, and this process's GPU memory jumps by 2 GiB while another line runs.
NVML is polled at 10 Hz and charged every 20 ms tick, so a phase's edges may shift by up to
~0.15 s; the tolerances below allow that and nothing more.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from peakline_proc import marked_lines, run_peakline

ROOT = Path(__file__).resolve().parents[2]
FAKE_NVML_SOURCE = ROOT / "tests" / "native" / "fake_nvml" / "fake_nvml.c"
FAKE_TORCH = Path(__file__).resolve().parent / "fake_torch"
GIB = 1 << 30


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory) -> str:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in NVML library")
    out = tmp_path_factory.mktemp("fake_nvml") / "libfake_nvml.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(FAKE_NVML_SOURCE),
                    "-lpthread"], check=True)
    return str(out)


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def line(profile: dict, path: Path, lineno: int) -> dict:
    for rec in profile["files"][str(path)]["lines"]:
        if rec["lineno"] == lineno:
            return rec
    raise AssertionError(f"no record for line {lineno}")


def gpu_keys(profile: dict) -> set[str]:
    keys = {k for k in profile if k.startswith("gpu")}
    for record in profile["files"].values():
        for rec in record["lines"]:
            keys |= {k for k in rec if k.startswith("gpu")}
    return keys


PHASES = """\
import ctypes, os, time
fake = ctypes.CDLL(os.environ["PEAKLINE_NVML_LIBRARY"])
fake.fake_nvml_set_process.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong]

def busy_phase():
    fake.fake_nvml_set_utilization(0, 80)
    time.sleep(1.0)  # LINE busy
    fake.fake_nvml_set_utilization(0, 0)

def idle_phase():
    time.sleep(1.0)  # LINE idle

def alloc_phase():
    fake.fake_nvml_set_process(0, 0, 2 << 30)  # pid 0: this process
    time.sleep(0.5)  # LINE alloc

busy_phase()
idle_phase()
alloc_phase()
time.sleep(0.5)  # LINE hold
"""


def test_utilisation_and_memory_land_on_the_lines_that_ran(tmp_path, fake_nvml):
    script = write(tmp_path, "phases.py", PHASES)
    marks = marked_lines(script)
    res = run_peakline([str(script)], tmp_path, env={"PEAKLINE_NVML_LIBRARY": fake_nvml})
    assert res.returncode == 0, res.stderr
    profile = res.profile()
    gpu = profile["gpu"]
    assert gpu["device_name"] == "Fake GPU" and gpu["devices"] == ["Fake GPU"]
    assert gpu["memory_source"] == "process" and gpu["alloc_source"] == "nvml_ticks"
    assert gpu["peak_bytes"] == 2 * GIB
    assert gpu["unavailable"] == []

    busy, idle = line(profile, script, marks["busy"]), line(profile, script, marks["idle"])
    alloc, hold = line(profile, script, marks["alloc"]), line(profile, script, marks["hold"])
    # Truth: 0.8 GPU-s on `busy`, none elsewhere; edges move by at most one poll (0.1 s × 80%).
    assert 0.65 <= busy["gpu_util_s"] <= 0.85, busy
    assert idle["gpu_util_s"] <= 0.1 and alloc["gpu_util_s"] <= 0.02, (idle, alloc)
    assert abs(gpu["util_s"] - 0.8) <= 0.12
    # 2 GiB appear while `alloc` sleeps and are still held on `hold`.
    assert alloc["gpu_alloc_bytes"] == alloc["gpu_net_bytes"] == 2 * GIB
    assert alloc["gpu_live_at_peak_bytes"] == 2 * GIB and alloc["gpu_peak_bytes"] == 2 * GIB
    assert hold["gpu_alloc_bytes"] == 0 and hold["gpu_peak_bytes"] == 2 * GIB
    assert busy["gpu_peak_bytes"] == 0
    # Every line of a GPU-profiled run carries the GPU fields.
    assert all("gpu_util_s" in rec for rec in profile["files"][str(script)]["lines"])


def test_absent_library_means_no_gpu_fields_and_no_error(tmp_path):
    script = write(tmp_path, "plain.py", "import time\ntime.sleep(0.2)\n")
    res = run_peakline([str(script)], tmp_path,
                       env={"PEAKLINE_NVML_LIBRARY": str(tmp_path / "missing.so")})
    assert res.returncode == 0, res.stderr
    assert gpu_keys(res.profile()) == set()
    assert "nvml" not in res.stderr.lower() and "gpu" not in res.stderr.lower()


@pytest.mark.parametrize("fail", ["nvmlInit_v2=9",            # DRIVER_NOT_LOADED
                                  "nvmlInit_v2=4",            # NO_PERMISSION
                                  "nvmlDeviceGetCount_v2=15",  # GPU_IS_LOST
                                  "nvmlDeviceGetHandleByIndex_v2=4"])
def test_nvml_that_cannot_start_means_no_gpu_fields(tmp_path, fake_nvml, fail):
    script = write(tmp_path, "plain.py", "import time\ntime.sleep(0.2)\n")
    res = run_peakline([str(script)], tmp_path,
                       env={"PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_FAIL": fail})
    assert res.returncode == 0, res.stderr
    assert gpu_keys(res.profile()) == set()


def test_no_device_means_no_gpu_fields(tmp_path, fake_nvml):
    script = write(tmp_path, "plain.py", "import time\ntime.sleep(0.2)\n")
    res = run_peakline([str(script)], tmp_path,
                       env={"PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_DEVICES": "0"})
    assert res.returncode == 0, res.stderr
    assert gpu_keys(res.profile()) == set()


@pytest.mark.parametrize("code,name", [(3, "NOT_SUPPORTED"), (4, "NO_PERMISSION"),
                                       (1, "UNINITIALIZED"), (9, "DRIVER_NOT_LOADED"),
                                       (15, "GPU_IS_LOST"), (999, "UNKNOWN")])
def test_each_failing_query_marks_only_its_column(tmp_path, fake_nvml, code, name):
    script = write(tmp_path, "plain.py", "import time\ntime.sleep(0.4)  # LINE sleep\n")
    # Utilisation fails; the per-process query fails too, so device-wide memory stands in.
    fails = (f"nvmlDeviceGetUtilizationRates={code},"
             f"nvmlDeviceGetComputeRunningProcesses_v3={code},"
             f"nvmlDeviceGetComputeRunningProcesses_v2={code}")
    res = run_peakline([str(script)], tmp_path, env={
        "PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_FAIL": fails, "FAKE_NVML_UTIL": "50",
        "FAKE_NVML_MEM_USED": str(3 * GIB)})
    assert res.returncode == 0, res.stderr
    profile = res.profile()
    gpu = profile["gpu"]
    assert gpu["util_s"] is None and gpu["util_mean_pct"] is None
    assert gpu["memory_source"] == "device" and gpu["peak_bytes"] == 3 * GIB
    assert any(u.startswith(f"utilization: {name}") for u in gpu["unavailable"]), gpu
    assert any(u.startswith(f"processes: {name}") for u in gpu["unavailable"]), gpu
    rec = line(profile, script, 2)
    assert "gpu_util_s" not in rec and rec["gpu_peak_bytes"] == 3 * GIB


def test_gpu_lost_mid_run_is_survived(tmp_path, fake_nvml):
    script = write(tmp_path, "lost.py", """\
        import ctypes, os, time
        fake = ctypes.CDLL(os.environ["PEAKLINE_NVML_LIBRARY"])
        time.sleep(0.3)
        for entry in (b"nvmlDeviceGetUtilizationRates", b"nvmlDeviceGetMemoryInfo",
                      b"nvmlDeviceGetComputeRunningProcesses_v3",
                      b"nvmlDeviceGetComputeRunningProcesses_v2"):
            fake.fake_nvml_fail(entry, 15)  # GPU_IS_LOST
        time.sleep(0.3)
        print("done")
    """)
    res = run_peakline([str(script)], tmp_path,
                       env={"PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_UTIL": "100"})
    assert res.returncode == 0, res.stderr
    assert res.stdout == "done\n"
    gpu = res.profile()["gpu"]
    assert any("GPU_IS_LOST" in u for u in gpu["unavailable"]), gpu
    assert 0.15 <= gpu["util_s"] <= 0.5


def test_v2_only_driver(tmp_path, fake_nvml):
    script = write(tmp_path, "plain.py", "import time\ntime.sleep(0.3)  # LINE sleep\n")
    res = run_peakline([str(script)], tmp_path, env={
        "PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_NO_V3": "1",
        "FAKE_NVML_PROC_PID": "self", "FAKE_NVML_PROC_BYTES": str(GIB)})
    assert res.returncode == 0, res.stderr
    gpu = res.profile()["gpu"]
    assert gpu["memory_source"] == "process" and gpu["peak_bytes"] == GIB
    assert gpu["unavailable"] == []


def test_session_option_gpu_false_disables_it(tmp_path, fake_nvml):
    # In a subprocess: the core allows one session per process and the env must be set first.
    code = textwrap.dedent("""\
        import json, sys, time
        from peakline.session import Session, SessionOptions
        s = Session(SessionOptions(gpu=False, memory=False))
        s.start(); time.sleep(0.2); s.stop()
        print(json.dumps(s.profile().to_dict()))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={**_env(), "PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_UTIL": "90"})
    assert proc.returncode == 0, proc.stderr
    assert gpu_keys(json.loads(proc.stdout)) == set()


def test_no_gpu_flag(tmp_path, fake_nvml):
    help_text = subprocess.run([sys.executable, "-m", "peakline", "run", "--help"],
                               capture_output=True, text=True).stdout
    if "--no-gpu" not in help_text:
        pytest.skip("`peakline run --no-gpu` is not wired into the CLI yet")
    script = write(tmp_path, "plain.py", "import time\ntime.sleep(0.2)\n")
    res = run_peakline(["--no-gpu", str(script)], tmp_path,
                       env={"PEAKLINE_NVML_LIBRARY": fake_nvml, "FAKE_NVML_UTIL": "90"})
    assert res.returncode == 0, res.stderr
    assert gpu_keys(res.profile()) == set()


TORCH_SCRIPT = """\
import time
import torch

torch.cuda.init()
time.sleep(0.1)
x = torch.cuda.alloc(2 << 30)  # LINE alloc
y = torch.cuda.alloc(1 << 30)  # LINE temp
torch.cuda.free(y)  # LINE free
time.sleep(0.3)  # LINE after
"""


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)


def test_torch_allocation_history_charges_the_allocating_line(tmp_path):
    script = write(tmp_path, "tt.py", TORCH_SCRIPT)
    marks = marked_lines(script)
    res = run_peakline([str(script)], tmp_path, env={
        "PYTHONPATH": f"{FAKE_TORCH}:{_env().get('PYTHONPATH', '')}",
        "PEAKLINE_NVML_LIBRARY": str(tmp_path / "missing.so")})  # PyTorch alone, no NVML
    assert res.returncode == 0, res.stderr
    profile = res.profile()
    gpu = profile["gpu"]
    assert gpu["alloc_source"] == "torch_history", gpu
    assert gpu["memory_source"] == "torch_reserved" and gpu["util_s"] is None
    assert gpu["torch"]["max_allocated_bytes"] == 3 * GIB
    assert gpu["torch"]["allocated_end_bytes"] == 2 * GIB
    alloc, temp = line(profile, script, marks["alloc"]), line(profile, script, marks["temp"])
    # Exact although each line takes microseconds: from PyTorch's own allocation history.
    assert alloc["gpu_alloc_bytes"] == alloc["gpu_net_bytes"] == 2 * GIB
    assert alloc["gpu_live_at_peak_bytes"] == 2 * GIB
    assert temp["gpu_alloc_bytes"] == GIB and temp["gpu_net_bytes"] == 0
    assert temp["gpu_live_at_peak_bytes"] == GIB  # held when the 3 GiB peak was reached


def test_torch_without_history_falls_back_to_ticks(tmp_path):
    script = write(tmp_path, "tt.py", TORCH_SCRIPT)
    res = run_peakline([str(script)], tmp_path, env={
        "PYTHONPATH": f"{FAKE_TORCH}:{_env().get('PYTHONPATH', '')}",
        "FAKE_TORCH_NO_HISTORY": "1", "PEAKLINE_NVML_LIBRARY": str(tmp_path / "missing.so")})
    assert res.returncode == 0, res.stderr
    profile = res.profile()
    gpu = profile["gpu"]
    assert gpu["alloc_source"] == "torch_ticks"
    assert any(u.startswith("torch: allocation history unavailable") for u in gpu["unavailable"])
    # Tick attribution: the 2 GiB still held are charged to some line of the script.
    lines = profile["files"][str(script)]["lines"]
    assert sum(r["gpu_net_bytes"] for r in lines) == 2 * GIB


def test_profile_model_round_trips_and_validates_gpu_fields(build, make_meta):
    from peakline.errors import ProfileFormatError
    from peakline.model.profile import Profile

    profile = build([("/app/x.py", "<module>", 1, 3)], [(1, (0,), 10, 0, 0, 0, 1, 0)])
    data = profile.to_dict()
    data["files"]["/app/x.py"]["lines"][0].update(
        {"gpu_util_s": 0.5, "gpu_peak_bytes": 10, "gpu_alloc_bytes": 4, "gpu_net_bytes": -2,
         "gpu_live_at_peak_bytes": 3})
    data["gpu"] = {"device_name": "H200", "devices": ["H200"], "peak_bytes": 10,
                   "util_mean_pct": 50.0, "util_s": 0.5, "memory_source": "process",
                   "alloc_source": "nvml_ticks", "poll_interval_s": 0.1, "readings": 5,
                   "unavailable": [], "torch": {"max_allocated_bytes": 7}}
    loaded = Profile.from_dict(data)
    assert loaded.gpu.device_name == "H200" and loaded.gpu.torch == {"max_allocated_bytes": 7}
    assert loaded.files["/app/x.py"].lines[0].gpu_net_bytes == -2
    assert Profile.from_dict(loaded.to_dict()).to_dict() == loaded.to_dict()
    data["files"]["/app/x.py"]["lines"][0]["gpu_util_s"] = -1
    with pytest.raises(ProfileFormatError, match="gpu_util_s"):
        Profile.from_dict(data)
    data["files"]["/app/x.py"]["lines"][0]["gpu_util_s"] = 0.5
    data["gpu"]["memory_source"] = "guess"
    with pytest.raises(ProfileFormatError, match="memory_source"):
        Profile.from_dict(data)


def test_allocations_before_the_history_began_make_it_incomplete(tmp_path):
    # CUDA initialised and 1 GiB allocated before the probe's first tick could arm the history:
    # the replay cannot account for every byte, so the per-tick figures are used, and said so.
    script = write(tmp_path, "early.py", """\
        import time
        import torch
        torch.cuda.init(); early = torch.cuda.alloc(1 << 30)
        time.sleep(0.2)
        late = torch.cuda.alloc(1 << 30)
        time.sleep(0.2)
    """)
    res = run_peakline([str(script)], tmp_path, env={
        "PYTHONPATH": f"{FAKE_TORCH}:{_env().get('PYTHONPATH', '')}",
        "PEAKLINE_NVML_LIBRARY": str(tmp_path / "missing.so")})
    assert res.returncode == 0, res.stderr
    gpu = res.profile()["gpu"]
    assert gpu["alloc_source"] == "torch_ticks", gpu
    assert any("history incomplete" in u for u in gpu["unavailable"]), gpu
