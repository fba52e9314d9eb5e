#include "gpu/gpu_aggregator.h"

#include <algorithm>

namespace peakline::gpu {

GpuAggregator::GpuAggregator(aggregate::StackTable* table, std::unique_ptr<NvmlPoller> poller,
                             std::string unavailable, PyObject* torch_probe)
    : table_(table), poller_(std::move(poller)), unavailable_(std::move(unavailable)),
      torch_probe_(torch_probe) {
  Py_XINCREF(torch_probe_);
}

GpuAggregator::~GpuAggregator() {
  if (poller_) poller_->Stop();
  Py_XDECREF(torch_probe_);
}

void GpuAggregator::Start(int64_t now_ns) {
  last_tick_ns_ = now_ns;
  int64_t allocated = 0, reserved = 0;
  if (ProbeTorch(&allocated, &reserved)) {  // PyTorch already on CUDA: that is the baseline
    tracking_torch_ = true;
    last_tracked_ = allocated;
  }
  if (poller_) {
    const GpuReading first = poller_->PollOnce();  // consumed by the first tick
    if (!tracking_torch_ && first.memory_bytes >= 0) last_tracked_ = first.memory_bytes;
    poller_->Start();
  }
  stats_.tracked_peak_bytes = last_tracked_;
}

void GpuAggregator::StopThread() {
  if (poller_) poller_->Stop();
}

bool GpuAggregator::ProbeTorch(int64_t* allocated, int64_t* reserved) {
  if (torch_probe_ == nullptr) return false;
  // No garbage collection during the call: a collection could free a code object, whose
  // deallocation hook would re-enter the aggregator in the middle of a tick.
  const int gc_was_enabled = PyGC_Disable();
  PyObject* result = PyObject_CallNoArgs(torch_probe_);
  if (gc_was_enabled) PyGC_Enable();
  bool ok = false;
  if (result == nullptr) {
    PyErr_Clear();
    ++stats_.torch_probe_errors;
  } else if (result != Py_None) {
    long long a = -1, r = -1;
    if (PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 2) {
      a = PyLong_AsLongLong(PyTuple_GET_ITEM(result, 0));
      r = PyLong_AsLongLong(PyTuple_GET_ITEM(result, 1));
    }
    if (PyErr_Occurred() || a < 0 || r < 0) {
      PyErr_Clear();
      ++stats_.torch_probe_errors;
    } else {
      *allocated = a;
      *reserved = r;
      ok = true;
    }
  }
  Py_XDECREF(result);
  return ok;
}

void GpuAggregator::OnTick(int64_t now_ns, const std::function<uint32_t()>& main_stack) {
  readings_.clear();
  if (poller_) poller_->Drain(&readings_);
  for (const GpuReading& r : readings_) {
    ++stats_.readings;
    util_pct_ = r.util_pct;
    util_devices_ = r.util_devices;
    if (r.util_pct >= 0) ++stats_.util_readings;
    nvml_bytes_ = r.memory_bytes;
    if (r.memory_source == MemorySource::kProcess) ++stats_.process_memory_readings;
    if (r.memory_source == MemorySource::kDevice) ++stats_.device_memory_readings;
  }
  int64_t torch_allocated = 0, torch_reserved = 0;
  const bool torch = ProbeTorch(&torch_allocated, &torch_reserved);
  if (torch) ++stats_.torch_ticks;

  const int64_t dt = std::max<int64_t>(0, now_ns - last_tick_ns_);
  last_tick_ns_ = now_ns;
  int64_t busy = 0;
  if (util_pct_ >= 0) {
    busy = dt * util_pct_ / 100;
    stats_.busy_ns += busy;
    stats_.util_observed_ns += dt * util_devices_;
  }
  // The process holds at least what PyTorch reserved, whatever NVML says (sandboxes such as
  // gVisor may list no process at all).
  const int64_t held = std::max(nvml_bytes_, torch ? torch_reserved : int64_t{-1});
  if (held >= 0) stats_.peak_bytes = std::max(stats_.peak_bytes, held);

  // The tracked series: PyTorch's allocated bytes once it is on CUDA (allocated was 0 before
  // it initialised CUDA, so that is the switch-over baseline), else NVML's figure.
  int64_t tracked = -1;
  if (torch) {
    if (!tracking_torch_) {
      tracking_torch_ = true;
      last_tracked_ = 0;
    }
    tracked = torch_allocated;
  } else if (!tracking_torch_) {
    tracked = nvml_bytes_;
  }
  int64_t delta = 0;
  if (tracked >= 0) {
    if (last_tracked_ >= 0) delta = tracked - last_tracked_;
    last_tracked_ = tracked;
  }
  const bool new_peak = tracked > stats_.tracked_peak_bytes;
  if (new_peak) stats_.tracked_peak_bytes = tracked;
  if (busy == 0 && held < 0 && delta == 0) {
    if (new_peak) ++epoch_;
    return;
  }

  aggregate::StackCounters& c = table_->counters(main_stack());
  c.gpu_util_ns += busy;
  c.gpu_peak_bytes = std::max(c.gpu_peak_bytes, held);
  if (delta != 0) {
    if (c.gpu_peak_epoch != epoch_) {
      c.gpu_net_at_epoch_start = c.gpu_net_bytes;
      c.gpu_peak_epoch = epoch_;
    }
    if (delta > 0) c.gpu_alloc_bytes += delta;
    c.gpu_net_bytes += delta;
  }
  if (new_peak) ++epoch_;  // a new maximum: every stack's current value is its value at this peak
}

}  // namespace peakline::gpu
