"""Where code built at run time came from: the real file of a ``<dynamic-code>`` code object.

cloudpickle (the pickler of joblib/loky, Dask and scikit-learn's ``n_jobs``) ships a function
that is defined in ``__main__`` (or registered to be pickled by value) as its code object's
fields, and rebuilds the code object in the worker with ``co_filename = "<dynamic-code>"``
(it keeps the payload identical wherever the function was defined). The line numbers are
intact; the file is not in the code object any more, but the function rebuilt around it gets
the defining module's ``__file__`` in its globals. The core asks :func:`locate` once per such
code object (``python/code_resolver.h``) and records the answer as the frame's file, so the
worker's lines merge with the parent's lines of the same file.

How: the functions alive in the process whose code is dynamic are found by one pass over the
garbage collector's objects (a function is tracked; a code object is not), and each one's
code, with the code objects nested in it (comprehensions, lambdas, inner functions), is
remembered under a content key — qualified name, first line, length in code units — that the
core can also compute for a code object that is being freed (its function is gone then, so
only an earlier pass can answer). A worker that runs the same function for many tasks
rebuilds a new code object per task: the key answers them without a new pass. Keys of code
objects whose function has no ``__file__`` (a ``-c`` program, a notebook cell) are remembered
as unanswerable, so they never cost a second pass.

Runs on the core's aggregator thread with the GIL held; allocations there are not counted.
"""

from __future__ import annotations

import gc

DYNAMIC_FILE = "<dynamic-code>"

_files: dict = {}  # (qualname, first_lineno, n_code_units) -> str | None
_function_type = type(lambda: None)
_code_type = type((lambda: None).__code__)


def code_key(code) -> tuple:
    """The content key of a code object, as the core computes it (``Py_SIZE`` = code units)."""
    # 3.10's code objects have no co_qualname: the core uses co_name there too.
    return (getattr(code, "co_qualname", code.co_name), code.co_firstlineno,
            len(code.co_code) // 2)


def _learn(function) -> None:
    file = function.__globals__.get("__file__")
    if not isinstance(file, str) or not file:
        file = None
    pending = [function.__code__]
    while pending:
        code = pending.pop()
        if code.co_filename != DYNAMIC_FILE:
            continue
        key = code_key(code)
        if _files.get(key) is None:
            _files[key] = file
        pending.extend(c for c in code.co_consts if type(c) is _code_type)


def _scan() -> None:
    for obj in gc.get_objects():
        if type(obj) is _function_type and obj.__code__.co_filename == DYNAMIC_FILE:
            _learn(obj)


def locate(code, qualname: str, first_lineno: int, n_code_units: int) -> str | None:
    """The file the dynamic code object was defined in, or None when it cannot be known.

    ``code`` is None when the object is being freed: only keys learnt earlier answer then.
    """
    key = (qualname, first_lineno, n_code_units)
    if key in _files:
        return _files[key]
    if code is None:
        return None
    _scan()
    # Not found (its function already gone, or no function at all): unanswerable for good.
    return _files.setdefault(key, None)
