"""The C++ core's hand-off to Python, declared once on this side (docs/internals-raw-samples.md).

``_core.collect()`` (and ``collect_running()``) returns one dict per session whose rows are
plain tuples: cheap for the core to make, and what ``marshal`` carries from an attached process
(``_attach_agent.py``). Each row kind is declared here as a named tuple with the core's field
order; readers wrap a row (``Stack(*row)``) and read it by name, never by index. The core
exports its own names (``_core.raw_fields()``, declared once in bindings/core_module.cc) and
tests/python/test_raw_contract.py holds the two sides equal; it also holds the counter names
below equal to what a real session sends.

Times are integer nanoseconds, bytes integer bytes. The profile file (docs/profile-format.md)
is built from these by ``peakline.model.builder``.
"""

from __future__ import annotations

# collections.namedtuple, not typing.NamedTuple: a session reads rows when it stops, inside the
# profiled program, which peakline keeps free of typing (~0.6 MiB; session.py).
from collections import namedtuple


def _row(name: str, doc: str, fields: list[str], defaults: tuple = ()) -> type:
    row = namedtuple(name, fields, defaults=defaults)
    row.__doc__ = doc
    row.__module__ = __name__
    return row


Frame = _row("Frame", 'raw["frames"]: interned frames, a frame\'s id is its index.', [
    "file",           # str: co_filename
    "function",       # str: co_qualname (3.10: co_name)
    "first_lineno",   # int: co_firstlineno
    "lineno",         # int: the line of the sampled instruction; negative when unknown
])
Stack = _row("Stack", 'raw["stacks"]: one row per distinct (thread, stack).', [
    "tid",            # int: the sampled thread's kernel id
    "frames",         # tuple[int, ...]: frame ids, LEAF FIRST (innermost frame at [0])
    "cpu_python_ns",  # on-CPU while the interpreter ran bytecode
    "cpu_native_ns",  # on-CPU user time outside the interpreter
    "cpu_system_ns",  # on-CPU kernel time
    "wait_ns",        # off-CPU, less its run delay
    "cpu_samples",
    "wait_samples",
    "run_delay_ns",   # off-CPU, runnable but not scheduled (0 where a row leaves it out)
], defaults=(0,))
Thread = _row("Thread", 'raw["threads"]: the core\'s accounting of each thread.', [
    "tid",
    "python",         # bool: the thread ran Python code (false: a native thread)
    "cpu_ns",
    "wait_ns",
    "run_delay_ns",   # (0 where a row leaves it out)
], defaults=(0,))
ActivityBucket = _row("ActivityBucket", 'raw["activity"]["buckets"]: equal time buckets from '
                      "the session's start.", [
    "cpu_ns",         # CPU sampled in the bucket, all threads
    "frame",          # the main thread's innermost reported frame id, -1: none
])
TimePoint = _row("TimePoint", 'A point of raw["memory"]["timeline"] and of a MemoryLine\'s.', [
    "t_ns",           # since the session's start
    "bytes",          # live bytes
])
MemoryStack = _row("MemoryStack", 'raw["memory"]["stacks"]: parallel to raw["stacks"] (same '
                   "index, same stack); sampled estimates.", [
    "alloc_python_bytes",  # PyMem/PyObject domains
    "alloc_native_bytes",  # malloc family and anonymous mmap outside them
    "free_bytes",          # of this stack's allocations, freed
    "live_bytes",          # of them, still live
    "live_at_peak_bytes",  # live when the heap reached its peak
    "copy_bytes",          # memcpy family
    "alloc_samples",
    "live_at_peak_variance",  # float, bytes^2: the estimated variance of live_at_peak_bytes
    "live_variance",          # float, bytes^2: the estimated variance of live_bytes
], defaults=(0.0, 0.0))
MemoryLine = _row("MemoryLine", 'raw["memory"]["lines"]: per reported line, its live bytes.', [
    "file",
    "lineno",
    "live_bytes",
    "live_at_peak_bytes",
    "timeline",       # [TimePoint rows], at most one per aggregator tick
])
GpuStack = _row("GpuStack", 'raw["gpu"]["stacks"]: parallel to raw["stacks"] when measured.', [
    "util_ns",        # GPU busy time charged to the stack
    "peak_bytes",     # most GPU memory held while it ran
    "alloc_bytes",
    "net_bytes",
    "live_at_peak_bytes",
])
GpuError = _row("GpuError", 'raw["gpu"]["errors"]: NVML queries that failed.', [
    "query",          # "utilization" | "memory" | "processes"
    "code",           # the NVML return code's name
    "polls",          # how many polls it failed in
])
TorchLine = _row("TorchLine", 'raw["gpu"]["torch"]["lines"]: made in Python by '
                 "peakline.gpu_torch, not by the core.", [
    "file",
    "lineno",
    "alloc_bytes",
    "net_bytes",
    "live_at_peak_bytes",
])


# The rows the core makes, by the name raw_fields() gives them.
CORE_ROWS = (Frame, Stack, Thread, ActivityBucket, TimePoint, MemoryStack, MemoryLine, GpuStack,
             GpuError)

# Counters: {name: int} dicts, each name set once where the core fills it in
# (engine/profiler.cc, SnapshotOf) and read by that name here.
CPU_STATS = {
    "cpu_samples": "CPU-timer samples taken",
    "wait_samples": "wall-clock samples of threads that were not running",
    "dropped_samples": "samples lost (ring full)",
    "invalid_frames": "frames that failed validation, dropped from their stack",
    "truncated_stacks": "stacks cut at the core's maximum depth",
    "ticks": "aggregator ticks",
    "timer_errors": "threads whose CPU timer could not be armed (not sampled)",
    "skipped_ticks": "ticks skipped: another thread was half-way through draining",
    "deferred_code_frees": "code objects freed while the core was in a Python callback",
    "finished_threads": "threads that reported their end (CPU to their end)",
    "exit_tails": "threads whose CPU from their reported end to their exit was added",
    "dropped_exit_tails": "such tails lost to a full table (that CPU is not counted)",
    "run_delay_readings": "schedstat reads that split run delay off wait",
    "main_stack_readings": "main-thread stacks read for other threads' events",
    "cpu_signal": "the real-time signal the CPU timers send (-1: none installed)",
    "cpu_signal_handler_replaced": "1: the kernel no longer runs peakline's handler",
    "forwarded_signals": "arrivals of that signal that were not ticks (the program's)",
    "cpu_interval_ns": "the CPU sampling interval",
    "tick_interval_ns": "the aggregator's tick interval",
    "start_monotonic_ns": "the session's time zero on CLOCK_MONOTONIC",
}
MEMORY_STATS = {
    "peak_bytes": "exact high-water mark of live heap bytes",
    "peak_time_ns": "when it was reached, since the session's start",
    "live_end_bytes": "exact live bytes now, relative to the start",
    "sampling_interval_bytes": "mean allocated bytes between samples",
    "copy_sampling_interval_bytes": "mean copied bytes between samples",
    "alloc_samples": "allocation samples taken",
    "free_samples": "frees of sampled blocks",
    "copy_samples": "copy samples taken",
    "dropped_events": "events lost (ring full)",
    "untracked_samples": ("samples not tracked: the sampled pointer table's window was full, "
                          "or a sampled Python object's free could not be arranged to be seen "
                          "(probe mode refused: docs/architecture.md)"),
    "blas_buffer_bytes": "most bytes OpenBLAS per-thread buffers held at once",
    "blas_buffer_maps": "OpenBLAS per-thread buffers mapped",
    "peak_events": "new heap peaks announced by the hooks",
    "invalid_events": "malformed events found in the ring (dropped)",
    "staged_events": "events staged out of the ring while a C call held the GIL",
}
GPU_STATS = {
    "readings": "NVML readings taken",
    "util_readings": "of which utilisation was read",
    "process_memory_readings": "of which the process's own memory was read",
    "device_memory_readings": "of which only device-wide memory was read",
    "busy_ns": "GPU busy time (utilisation x time)",
    "util_observed_ns": "time over which utilisation was observed",
    "peak_bytes": "most GPU memory held (-1: unknown)",
    "torch_ticks": "ticks that read PyTorch's allocator",
    "torch_probe_errors": "PyTorch probe calls that failed",
    "tracked_peak_bytes": "the tracked total's peak",
    "poll_interval_ns": "NVML polling interval",
    "dropped_readings": "readings discarded while nobody drained them (oldest first)",
    "pid_namespace": "1: the process runs in a nested PID namespace (NVML sees other pids)",
}
# Added by peakline.session when the session stops (not by the core).
SESSION_STATS = {"process_cpu_ns": "process CPU time (user + system) while profiled"}
