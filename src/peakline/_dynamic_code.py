"""Where code built at run time came from: the real file of a ``<dynamic-code>`` code object.

cloudpickle (the pickler of joblib/loky, Dask and scikit-learn's ``n_jobs``) ships a function
that is defined in ``__main__`` (or registered to be pickled by value) as its code object's
fields, and rebuilds the code object in the worker with ``co_filename = "<dynamic-code>"``
(it keeps the payload identical wherever the function was defined). The line numbers are
intact; the file is not in the code object any more, but the function rebuilt around it gets
the defining module's ``__file__`` in its globals. The core asks :func:`locate` once per such
code object (``python/code_resolver.h``) and records the answer as the frame's file, so the
worker's lines merge with the parent's lines of the same file.

How, cheapest first, each step remembering every dynamic code object it meets under a content
key — qualified name, first line, length in code units — that the core can also compute for
a code object that is being freed (only an earlier answer can serve it then):

1. **The running frames** (``sys._current_frames``): the core asks about a code object it
   has just sampled, so its frame is usually still on a thread's stack, and the frame's
   globals are the function's (``__file__``). Cost: the threads' stack depths.
2. **The young functions**: the collector's generations 0 and 1 (``gc.get_objects(gen)``),
   where a function rebuilt moments ago still is; bounded by the collector's thresholds, not
   by the heap. A function is tracked; a code object is not: functions are searched, and
   each one's code with the code objects nested in it (comprehensions, lambdas, inner
   functions).
3. **Every function** (``gc.get_objects()``): a pass over the whole heap, as long as the heap
   is small enough for it to be short (``FULL_SCAN_MAX_BLOCKS`` allocated blocks, by
   ``sys.getallocatedblocks``, about 60 ms here); on a larger heap the code object keeps the
   name ``<dynamic-code>`` rather than stall the program (measured: 1.7 s for
   ``gc.get_objects()`` on a 5-million-object heap, on this shared 2-core machine, loaded).

A worker that runs the same function for many tasks rebuilds a new code object per task: the
key answers them without a new search. Keys of code objects whose function has no
``__file__`` (a ``-c`` program, a notebook cell) are remembered as unanswerable, so they never
cost a second search.

Runs on the core's aggregator thread with the GIL held; allocations there are not counted.
"""

from __future__ import annotations

import gc
import sys

DYNAMIC_FILE = "<dynamic-code>"
FULL_SCAN_MAX_BLOCKS = 200_000

_files: dict = {}  # (qualname, first_lineno, n_code_units) -> str | None
_function_type = type(lambda: None)
_code_type = type((lambda: None).__code__)


def code_key(code) -> tuple:
    """The content key of a code object, as the core computes it (``Py_SIZE`` = code units)."""
    # 3.10's code objects have no co_qualname: the core uses co_name there too.
    return (getattr(code, "co_qualname", code.co_name), code.co_firstlineno,
            len(code.co_code) // 2)


def _learn(code, globals_: dict) -> None:
    """Remembers ``code`` and the code objects nested in it as defined in ``globals_``'s
    file."""
    file = globals_.get("__file__")
    if not isinstance(file, str) or not file:
        file = None
    pending = [code]
    while pending:
        code = pending.pop()
        if code.co_filename != DYNAMIC_FILE:
            continue
        key = code_key(code)
        if _files.get(key) is None:
            _files[key] = file
        pending.extend(c for c in code.co_consts if type(c) is _code_type)


def _search_frames() -> None:
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_filename == DYNAMIC_FILE:
                _learn(frame.f_code, frame.f_globals)
            frame = frame.f_back


def _search_functions(objects) -> None:
    for obj in objects:
        if type(obj) is _function_type and obj.__code__.co_filename == DYNAMIC_FILE:
            _learn(obj.__code__, obj.__globals__)


def locate(code, qualname: str, first_lineno: int, n_code_units: int) -> str | None:
    """The file the dynamic code object was defined in, or None when it cannot be known.

    ``code`` is None when the object is being freed: only keys learnt earlier answer then.
    """
    key = (qualname, first_lineno, n_code_units)
    if key in _files:
        return _files[key]
    if code is None:
        return None
    _search_frames()
    for generation in (0, 1):
        if key not in _files:
            _search_functions(gc.get_objects(generation))
    if key not in _files and sys.getallocatedblocks() <= FULL_SCAN_MAX_BLOCKS:
        _search_functions(gc.get_objects())
    # Not found (its function already gone, or no function at all, or too large a heap to
    # search): unanswerable for good.
    return _files.setdefault(key, None)
