import os
import sys
import threading

from . import _memory as memory  # noqa: F401  (torch.cuda.memory)

_state = memory._state


def init():
    with _state["lock"]:
        if _state["initialized"]:
            return
        _state["initialized"] = True
        queued, _state["queued"] = _state["queued"], []
    for fn in queued:
        fn()


def is_initialized():
    return _state["initialized"]


def _lazy_call(fn):
    with _state["lock"]:
        if not _state["initialized"]:
            _state["queued"].append(fn)
            return
    fn()


def device_count():
    return 1


def memory_allocated(device=None):
    return _state["allocated"]


def memory_reserved(device=None):
    return _state["reserved"]


def max_memory_allocated(device=None):
    return _state["max_allocated"]


def max_memory_reserved(device=None):
    return _state["reserved"]


def alloc(nbytes):
    """Allocate `nbytes` of fake device memory; returns a handle for free()."""
    init()
    frames = []
    f = sys._getframe(1)
    while f is not None:  # innermost first
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno,
                       "name": f.f_code.co_name})
        f = f.f_back
    with _state["lock"]:
        _state["next_addr"] += 1 << 20
        addr = _state["next_addr"]
        _state["allocated"] += nbytes
        _state["reserved"] = max(_state["reserved"], _state["allocated"])
        _state["max_allocated"] = max(_state["max_allocated"], _state["allocated"])
        if _state["history"]:
            _state["trace"].append({"action": "alloc", "addr": addr, "size": nbytes,
                                    "stream": 0, "frames": frames})
        _state["live"][addr] = nbytes
    return addr


def free(addr):
    with _state["lock"]:
        nbytes = _state["live"].pop(addr)
        _state["allocated"] -= nbytes
        if _state["history"]:
            _state["trace"].append({"action": "free_requested", "addr": addr, "size": nbytes,
                                    "stream": 0, "frames": []})
            _state["trace"].append({"action": "free_completed", "addr": addr, "size": nbytes,
                                    "stream": 0, "frames": []})
