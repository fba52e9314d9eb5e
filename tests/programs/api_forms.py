"""start/stop, the decorator, phases without a profile, and double start."""
import json
import sys

import peakline
from peakline.errors import ProfilerStateError

out = {}
with peakline.phase("not profiling"):  # a no-op without a profile
    pass


@peakline.profile(report=False)
def work(n):
    return sum(i * i for i in range(n))  # LINE decorated


out["decorated_result"] = work(300_000)
out["decorated_has_profile"] = work.last_profile is not None
peakline.start(sys.argv[1], cpu_only=True)
try:
    peakline.start()
except ProfilerStateError:
    out["double_start"] = "refused"
with peakline.phase("loop"):
    s = sum(i * i for i in range(300_000))  # LINE explicit
prof = peakline.stop()
out["phases"] = [ph.name for ph in prof.phases]
out["has_memory"] = prof.has_memory
try:
    peakline.stop()
except ProfilerStateError:
    out["double_stop"] = "refused"
print(json.dumps(out))
