"""Allocation storms inside C calls that hold the GIL: json.loads builds and the list's
deallocation frees ~60 MB of small objects each time without letting the aggregator in.
Run at --memory-sampling-interval 8K, every loads/free pushes ~7,000 events: several times
what the hooks' 256 KiB event ring holds. The staging thread must move them out meanwhile."""
import json

doc = json.dumps([[i, str(i), {"k": i * 0.5}] for i in range(200_000)])  # LINE build
for _ in range(4):
    obj = json.loads(doc)  # LINE loads
    obj = None  # LINE drop
print("done")
