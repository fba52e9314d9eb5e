"""Memory held because a module was imported is not a leak (tests/python/test_memory_headlines.py).

argv[1] == "import": the module fills its 40 MiB cache while being imported (not a leak);
"call": the same line grows the same cache when called after the import (flagged as a leak:
the control that shows the detector sees this growth).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import import_growth_mod  # noqa: E402  LINE import

if sys.argv[1:] == ["call"]:
    import_growth_mod.fill()  # LINE call
print(len(import_growth_mod.CACHE))
