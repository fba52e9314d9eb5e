import os
import threading

_state = {"lock": threading.Lock(), "initialized": False, "queued": [], "allocated": 0,
          "reserved": 0, "max_allocated": 0, "history": False, "trace": [], "live": {},
          "next_addr": 0}


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0,
                           device=None):
    if os.environ.get("FAKE_TORCH_NO_HISTORY") == "1":
        raise RuntimeError("recording history is not supported by this fake")
    _state["history"] = enabled is not None


def _snapshot(device=None):
    return {"segments": [], "device_traces": [list(_state["trace"])]}
