"""Allocation storms inside C calls that hold the GIL: the memory event ring's worst case.

    peakline run --no-report -o storm.json benchmarks/stress/gil_alloc_storm.py
    python -c "import json; print(json.load(open('storm.json'))['memory'])"

While json.dumps / json.loads / sorted run, peakline's aggregator cannot take the GIL to drain
the memory event ring, so every sampled allocation and every free of a sampled block would
wait there. `memory.not_sampled_events` counts the events that did not fit; `staged_events`
those the staging thread moved out meanwhile (docs/architecture.md, "Memory events while the
GIL is held"). Before that thread, 3,700-7,500 of ~17,600 were dropped (5 runs, 2 vCPU VM,
CPython 3.11.7); with it, 0 of ~17,700 (13,300-14,000 staged).
Needs about 3 GB of memory.
"""
import json
import time

t = time.perf_counter()
doc = json.dumps([{"k%d" % i: [i, str(i), i * 0.5]} for i in range(2_000_000)])
obj = json.loads(doc)  # ~1.5 GB of small objects, built in C with the GIL held
big = sorted(map(str, range(3_000_000)), key=len)
s = [x * 3 for x in ["ab"] * 5_000_000]
print(f"gil_alloc_storm: {time.perf_counter() - t:.2f} s")
