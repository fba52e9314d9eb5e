#!/usr/bin/env bash
# GPU check for an NVIDIA machine with PyTorch (the lent H200: python3 there holds
# torch, scikit-build-core and nanobind, and nothing can be downloaded, hence
# --no-build-isolation). Run from the repository root; well under 5 minutes:
#
#   bash scripts/gpu_check.sh            # writes to ${OUT:-/tmp/peakline-gpu-check}
#
# Profiles a PyTorch program that allocates a known 2 GiB tensor on one line and runs a matmul
# loop (synchronising on the same line) on another, then prints both lines' GPU fields and the
# run-wide `gpu` object. Expected: ~2 GiB (2147483648) gpu_alloc_bytes on `alloc`, nearly all
# gpu_util_s on `matmul`, gpu.device_name the card's name.
set -euo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/peakline-gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
"$PY" -m pip install -q --no-build-isolation --no-deps . 2>&1 | tail -3

cat > "$OUT/gpu_program.py" <<'PYEOF'
import time
import torch

torch.ones(1, device="cuda")  # CUDA context first, so the lines below measure only themselves
a = torch.randn(8192, 8192, device="cuda")
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")  # LINE alloc
time.sleep(0.3)
for _ in range(150): b = a @ a; torch.cuda.synchronize()  # LINE matmul
time.sleep(0.5)  # LINE idle
print("checksum", float(b[0, 0]), x.numel())
PYEOF

cd "$OUT"
time "$PY" -m peakline run -o "$OUT/gpu_profile.json" gpu_program.py 2> "$OUT/report.txt"
tail -n 40 "$OUT/report.txt"
"$PY" - "$OUT/gpu_profile.json" "$OUT/gpu_program.py" <<'PYEOF'
import json, sys
profile = json.load(open(sys.argv[1]))
path = sys.argv[2]
marks = {t.split("# LINE ")[1].strip(): i for i, t in enumerate(open(path), 1) if "# LINE " in t}
print("gpu:", json.dumps(profile.get("gpu"), indent=1))
key = next(k for k in profile["files"] if k.endswith("gpu_program.py"))
lines = {r["lineno"]: r for r in profile["files"][key]["lines"]}
for name, lineno in marks.items():
    rec = lines.get(lineno, {})
    fields = {k: v for k, v in rec.items() if k.startswith("gpu")}
    print(f"{name:7s} line {lineno}: wall {rec.get('wait_s', 0) + rec.get('cpu_python_s', 0) + rec.get('cpu_native_s', 0) + rec.get('cpu_system_s', 0):.2f}s {fields}")
alloc = lines.get(marks["alloc"], {})
matmul = lines.get(marks["matmul"], {})
ok_alloc = abs(alloc.get("gpu_alloc_bytes", 0) - 2 * 1024**3) <= 64 * 1024**2
ok_util = matmul.get("gpu_util_s", 0) >= 0.5 * (profile["gpu"].get("util_s") or 1)
print("CHECK alloc ~2 GiB on `alloc`:", "PASS" if ok_alloc else "FAIL")
print("CHECK most GPU time on `matmul`:", "PASS" if ok_util else "FAIL")
PYEOF
