// peakline._core: the nanobind module. Conversion only — no logic lives here; see
// session/profiler.h for the API and docs/internals-raw-samples.md for the data shape.
//
// Errors: the core returns a Status or Result (base/status.h); here, and only here, a failed
// one becomes what Python sees: a RuntimeError with the status's message, or the message as
// a value where the module has always returned one ('' when it worked). nanobind calls every
// function with the GIL held, hence PEAKLINE_REQUIRES(gil) on those that reach the session.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "attach/ptrace_injector.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cpu/native_thread_ids.h"
#include "python/code_resolver.h"
#include "python/gil.h"
#include "session/profiler.h"
#include "session/signal_watch.h"

namespace nb = nanobind;
using peakline::Status;
using peakline::python::gil;
using peakline::session::ProfilerConfig;
using peakline::session::Snapshot;

namespace {

void ThrowIfFailed(const Status& status) {
  if (!status.ok()) throw std::runtime_error(status.message());
}

void Start(int64_t cpu_interval_ns, int64_t tick_ns, bool sample_native_threads, int main_tid,
           nb::bytes call_opcodes, bool memory, int64_t memory_sampling_interval_bytes,
           int64_t copy_sampling_interval_bytes, nb::object file_filter, bool gpu,
           nb::object torch_probe) PEAKLINE_REQUIRES(gil) {
  ProfilerConfig config;
  config.gpu = gpu;
  config.torch_probe = torch_probe.is_none() ? nullptr : torch_probe.ptr();
  config.memory = memory;
  config.memory_sampling_interval_bytes = memory_sampling_interval_bytes;
  config.copy_sampling_interval_bytes = copy_sampling_interval_bytes;
  config.file_filter = file_filter.is_none() ? nullptr : file_filter.ptr();
  config.cpu_interval_ns = cpu_interval_ns;
  config.tick_ns = tick_ns;
  config.sample_native_threads = sample_native_threads;
  config.main_tid = main_tid;
  const auto* ops = static_cast<const unsigned char*>(call_opcodes.data());
  for (size_t i = 0; i < call_opcodes.size() && i < 256; ++i) config.call_opcodes[i] = ops[i] != 0;
  ThrowIfFailed(peakline::session::StartProfiler(config));
}

void Stop() PEAKLINE_REQUIRES(gil) { ThrowIfFailed(peakline::session::StopProfiler()); }

// '' or why not.
std::string ReleaseProcess(int wait_ms) PEAKLINE_REQUIRES(gil) {
  return peakline::session::ReleaseProcess(wait_ms).message();
}

void WatchSignal(int signo) { ThrowIfFailed(peakline::session::WatchSignal(signo)); }

// The snapshot is complete C++ data before the first Python object is made: making those may
// run Python (a collection, a finalizer) that touches the session.
nb::dict ToDict(const Snapshot& snap) {
  nb::list frames;
  for (const auto& [file, function, first_lineno, lineno] : snap.frames) {
    frames.append(nb::make_tuple(file, function, first_lineno, lineno));
  }
  nb::list stacks;
  for (const Snapshot::Stack& s : snap.stacks) {
    nb::list ids;
    for (uint32_t id : s.frames) ids.append(id);
    stacks.append(nb::make_tuple(s.tid, nb::tuple(ids), s.cpu_python_ns, s.cpu_native_ns,
                                 s.cpu_system_ns, s.wait_ns, s.cpu_samples, s.wait_samples,
                                 s.run_delay_ns));
  }
  nb::list threads;
  for (const auto& [tid, python, cpu_ns, wait_ns, run_delay_ns] : snap.threads) {
    threads.append(nb::make_tuple(tid, python, cpu_ns, wait_ns, run_delay_ns));
  }
  nb::dict stats;
  for (const auto& [name, value] : snap.stats) stats[name.c_str()] = value;
  nb::dict out;
  if (snap.memory) {
    nb::list mem_stacks;
    for (const Snapshot::MemoryStack& m : snap.memory_stacks) {
      mem_stacks.append(nb::make_tuple(m.alloc_python_bytes, m.alloc_native_bytes, m.free_bytes,
                                       m.live_bytes, m.live_at_peak_bytes, m.copy_bytes,
                                       m.alloc_samples));
    }
    nb::list lines;
    for (const Snapshot::MemoryLine& l : snap.memory_lines) {
      nb::list points;
      for (const auto& [t_ns, bytes] : l.timeline) points.append(nb::make_tuple(t_ns, bytes));
      lines.append(nb::make_tuple(l.file, l.lineno, l.live_bytes, l.live_at_peak_bytes, points));
    }
    nb::list timeline;
    for (const auto& [t_ns, bytes] : snap.timeline) timeline.append(nb::make_tuple(t_ns, bytes));
    nb::dict mstats;
    for (const auto& [name, value] : snap.memory_stats) mstats[name.c_str()] = value;
    nb::dict memory;
    memory["stacks"] = mem_stacks;
    memory["lines"] = lines;
    memory["timeline"] = timeline;
    memory["stats"] = mstats;
    out["memory"] = memory;
  }
  if (snap.gpu_requested) {
    nb::dict gpu;
    nb::list devices;
    for (const std::string& name : snap.gpu_devices) devices.append(name);
    nb::list gpu_stacks;
    for (const Snapshot::GpuStack& g : snap.gpu_stacks) {
      gpu_stacks.append(nb::make_tuple(g.util_ns, g.peak_bytes, g.alloc_bytes, g.net_bytes,
                                       g.live_at_peak_bytes));
    }
    nb::list errors;
    for (const auto& [query, code, n] : snap.gpu_errors) errors.append(nb::make_tuple(query, code, n));
    nb::dict gstats;
    for (const auto& [name, value] : snap.gpu_stats) gstats[name.c_str()] = value;
    gpu["measured"] = snap.gpu_measured;
    gpu["unavailable"] = snap.gpu_unavailable;
    gpu["devices"] = devices;
    gpu["stacks"] = gpu_stacks;
    gpu["errors"] = errors;
    gpu["stats"] = gstats;
    out["gpu"] = gpu;
  }
  nb::list activity;
  for (const auto& [cpu_ns, frame] : snap.activity) activity.append(nb::make_tuple(cpu_ns, frame));
  nb::dict activity_out;
  activity_out["width_ns"] = snap.activity_width_ns;
  activity_out["buckets"] = activity;
  out["activity"] = activity_out;
  out["frames"] = frames;
  out["stacks"] = stacks;
  out["threads"] = threads;
  out["stats"] = stats;
  return out;
}

// (error, python_object, version_hex): error '' when the target can be attached to.
nb::tuple AttachProbe(int pid) {
  const peakline::Result<peakline::attach::TargetInfo> info = peakline::attach::ProbeTarget(pid);
  if (!info.ok()) return nb::make_tuple(info.status().message(), std::string(), 0);
  return nb::make_tuple(std::string(), info->python_object, info->version_hex);
}

// (error, mode, page): error '' when the code was handed over.
nb::tuple AttachInject(int pid, const std::string& code, int wait_ms) {
  const peakline::Result<peakline::attach::Injection> r = [&] {
    nb::gil_scoped_release no_gil;
    return peakline::attach::InjectPython(pid, code, wait_ms);
  }();
  if (!r.ok()) return nb::make_tuple(r.status().message(), std::string(), 0);
  return nb::make_tuple(std::string(), r->mode, r->page);
}

// 0 or munmap's errno value.
int ReleasePage(uint64_t address, uint64_t length) {
  return peakline::attach::ReleasePage(address, length).code();
}

nb::dict Collect() PEAKLINE_REQUIRES(gil) { return ToDict(peakline::session::CollectProfile()); }
nb::dict CollectRunning() PEAKLINE_REQUIRES(gil) {
  return ToDict(peakline::session::CollectRunningProfile());
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "peakline's C++ measuring core (internal; use the peakline package API)";
  m.def("start", &Start, nb::arg("cpu_interval_ns"), nb::arg("tick_ns"),
        nb::arg("sample_native_threads"), nb::arg("main_tid"), nb::arg("call_opcodes"),
        nb::arg("memory") = false, nb::arg("memory_sampling_interval_bytes") = 512 * 1024,
        nb::arg("copy_sampling_interval_bytes") = 2 * 1024 * 1024,
        nb::arg("file_filter") = nb::none(), nb::arg("gpu") = false,
        nb::arg("torch_probe") = nb::none());
  m.def("stop", &Stop);
  m.def("active", &peakline::session::ProfilerActive);
  m.def("thread_started", &peakline::session::ThreadStarted,
        "Called by a new Python thread first thing (session/profiler.h).");
  m.def("remember_native_thread_id", &peakline::cpu::RememberNativeThreadId, nb::arg("ident"),
        nb::arg("native_id"), "threading's ident -> kernel id, for 3.10 (cpu/native_thread_ids.h).");
  m.def("thread_finishing", &peakline::session::ThreadFinishing,
        "Called by a Python thread last thing (session/profiler.h).");
  m.def("collect", &Collect);
  m.def("set_dynamic_code_locator", [](nb::object locator) {
    peakline::python::SetDynamicCodeLocator(locator.is_none() ? nullptr : locator.ptr());
  }, nb::arg("locator").none());
  m.def("collect_running", &CollectRunning,
        "The running session's data so far, same shape as collect() (session/profiler.h).");
  m.def("exclude_current_thread", &peakline::session::ExcludeCurrentThread,
        "Called by peakline's own Python threads first thing (session/profiler.h).");
  m.def("reset_after_fork", &peakline::session::ResetAfterForkInChild);
  m.def("watch_signal", &WatchSignal, nb::arg("signo"),
        "Make sure the Python handler of this signal runs (session/signal_watch.h).");
  m.def("release_process", &ReleaseProcess, nb::arg("wait_ms"),
        "After stop: take out the process hooks and the signal handler ('' or why not).");
  m.def("attach_probe", &AttachProbe, nb::arg("pid"),
        "(error, python_object, version_hex) of a process to attach to (attach/ptrace_injector.h).");
  m.def("attach_inject", &AttachInject, nb::arg("pid"), nb::arg("code"), nb::arg("wait_ms"),
        "Runs Python code in another CPython process: (error, mode, page) (attach/ptrace_injector.h).");
  m.def("attach_release_page", &ReleasePage, nb::arg("address"),
        nb::arg("length"), "munmap of the page the attach code came in; 0 or errno.");
  m.def("attach_page_placeholder", []() { return std::string(peakline::attach::kPagePlaceholder); });
  m.def("signal_handled", &peakline::session::SignalHandled, nb::arg("signo"));
}
