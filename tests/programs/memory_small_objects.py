"""Calibration: small Python objects (pymalloc's size classes), one line that keeps every
object it makes and one whose objects all die at once (tests/python/test_memory_accuracy.py).

Prints the true bytes the kept line asked for (sys.getsizeof: the size each object requested
from the Python allocator), and, under peakline, whether its Python-domain frees were probed
(probe mode, src/native/hooks/python_domain.h)."""
import sys

N = 1_500_000
kept = [None] * N  # allocated before the loop: the kept line makes only its strings
total = 0
for i in range(N):
    kept[i] = "%07d-kept-object" % i  # LINE kept
    tmp = [i, i + 1, str(i)]  # LINE churn
    total += len(tmp)
try:
    from peakline import _core
    probed = _core.python_frees_probed()
except ImportError:
    probed = None
print(sum(sys.getsizeof(s) for s in kept), total, probed)
