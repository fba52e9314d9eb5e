"""peakline/_dynamic_code.py: a ``<dynamic-code>`` code object (as cloudpickle rebuilds it)
is traced to its file through a running frame or a young function, and the search over every
function is skipped on a heap too large to walk without stalling the program."""

from __future__ import annotations

import gc
import threading
import types

from peakline import _dynamic_code


def _dynamic_function(name: str, file: str, body: str = "    return 1\n"):
    source = f"def {name}(*args):\n{body}"
    code = compile(source, _dynamic_code.DYNAMIC_FILE, "exec").co_consts[0]
    return types.FunctionType(code, {"__file__": file, "__name__": "shipped"})


def _locate(code):
    return _dynamic_code.locate(code, *_dynamic_code.code_key(code))


def test_a_running_frame_answers_without_searching_the_heap(monkeypatch):
    monkeypatch.setattr(_dynamic_code, "FULL_SCAN_MAX_BLOCKS", 0)
    monkeypatch.setattr(_dynamic_code, "_search_functions", lambda objects: None)
    function = _dynamic_function("running_task", "/real/running.py",
                                 "    args[0].set()\n    args[1].wait(30)\n")
    started, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=function, args=(started, release))
    thread.start()
    try:
        assert started.wait(30)
        assert _locate(function.__code__) == "/real/running.py"
    finally:
        release.set()
        thread.join()


def test_a_young_function_answers_and_an_old_one_only_on_a_small_heap(monkeypatch):
    young = _dynamic_function("young_task", "/real/young.py")
    assert _locate(young.__code__) == "/real/young.py"
    old = _dynamic_function("old_task", "/real/old.py")
    also_old = _dynamic_function("old_task_2", "/real/old.py")
    gc.collect()  # now in the oldest generation
    monkeypatch.setattr(_dynamic_code, "FULL_SCAN_MAX_BLOCKS", 0)
    assert _locate(old.__code__) is None  # too large a heap to search: stays unknown
    monkeypatch.setattr(_dynamic_code, "FULL_SCAN_MAX_BLOCKS", 1 << 62)  # a small heap
    assert _locate(also_old.__code__) == "/real/old.py"
