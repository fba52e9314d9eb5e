// peakline._core: the nanobind module. Conversion only — no logic lives here; see
// session/profiler.h for the API and docs/internals-raw-samples.md for the data shape.
//
// Errors: the core returns a Status or Result (status/status.h); here, and only here, a failed
// one becomes what Python sees: a RuntimeError with the status's message, or the message as
// a value where the module has always returned one ('' when it worked). nanobind calls every
// function with the GIL held, hence PEAKLINE_REQUIRES(gil) on those that reach the session.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attach/ptrace_injector.h"
#include "cpu/native_thread_ids.h"
#include "hooks/python_domain.h"
#include "python/code_resolver.h"
#include "python/gil.h"
#include "session/profiler.h"
#include "session/signal_watch.h"
#include "status/status.h"
#include "sync/thread_annotations.h"

namespace nb = nanobind;
using peakline::Status;
using peakline::python::gil;
using peakline::session::ProfilerConfig;
using peakline::session::Snapshot;

namespace {

// The binding of a function that reaches the core's state: F called with the GIL's stand-in
// held (python/gil.h: nothing on a GIL build, the core's critical section on a free-threaded
// one).
template <auto F>
struct Locked;
template <typename R, typename... A, R (*F)(A...)>
struct Locked<F> {
  static R Call(A... args) {
    peakline::python::AssumeGilHeld();  // nanobind calls it with the thread attached
    peakline::python::CoreSection section;
    return F(std::forward<A>(args)...);
  }
};

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

// ---- The raw contract (docs/internals-raw-samples.md) --------------------------------------
// Every row collect() hands to Python is a plain tuple: cheap to make, and what `marshal`
// carries from an attached process. Each row kind is declared once, below, as its columns:
// a field's name beside the member it reads. The rows are built from these lists and
// raw_fields() exports their names; peakline/model/raw.py declares the same rows on the Python
// side, which reads them by name, and tests/python/test_raw_contract.py holds the two equal.

template <typename Row, typename T>
struct Column {
  const char* name;
  T Row::*member;
};
template <typename Row, typename T>
Column(const char*, T Row::*) -> Column<Row, T>;

#define PEAKLINE_COLUMN(Row, member) Column{#member, &Row::member}

using Point = std::pair<int64_t, int64_t>;

constexpr auto kFrameColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::Frame, file), PEAKLINE_COLUMN(Snapshot::Frame, function),
    PEAKLINE_COLUMN(Snapshot::Frame, first_lineno), PEAKLINE_COLUMN(Snapshot::Frame, lineno));
constexpr auto kStackColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::Stack, tid), PEAKLINE_COLUMN(Snapshot::Stack, frames),
    PEAKLINE_COLUMN(Snapshot::Stack, cpu_python_ns), PEAKLINE_COLUMN(Snapshot::Stack, cpu_native_ns),
    PEAKLINE_COLUMN(Snapshot::Stack, cpu_system_ns), PEAKLINE_COLUMN(Snapshot::Stack, wait_ns),
    PEAKLINE_COLUMN(Snapshot::Stack, cpu_samples), PEAKLINE_COLUMN(Snapshot::Stack, wait_samples),
    PEAKLINE_COLUMN(Snapshot::Stack, run_delay_ns));
constexpr auto kThreadColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::Thread, tid), PEAKLINE_COLUMN(Snapshot::Thread, python),
    PEAKLINE_COLUMN(Snapshot::Thread, cpu_ns), PEAKLINE_COLUMN(Snapshot::Thread, wait_ns),
    PEAKLINE_COLUMN(Snapshot::Thread, run_delay_ns));
constexpr auto kActivityBucketColumns =
    std::make_tuple(Column{"cpu_ns", &Point::first}, Column{"frame", &Point::second});
constexpr auto kTimePointColumns =
    std::make_tuple(Column{"t_ns", &Point::first}, Column{"bytes", &Point::second});
constexpr auto kMemoryStackColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::MemoryStack, alloc_python_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, alloc_native_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, free_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, live_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, live_at_peak_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, copy_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, alloc_samples),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, live_at_peak_variance),
    PEAKLINE_COLUMN(Snapshot::MemoryStack, live_variance));
constexpr auto kMemoryLineColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::MemoryLine, file), PEAKLINE_COLUMN(Snapshot::MemoryLine, lineno),
    PEAKLINE_COLUMN(Snapshot::MemoryLine, live_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryLine, live_at_peak_bytes),
    PEAKLINE_COLUMN(Snapshot::MemoryLine, timeline));
constexpr auto kGpuStackColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::GpuStack, util_ns), PEAKLINE_COLUMN(Snapshot::GpuStack, peak_bytes),
    PEAKLINE_COLUMN(Snapshot::GpuStack, alloc_bytes), PEAKLINE_COLUMN(Snapshot::GpuStack, net_bytes),
    PEAKLINE_COLUMN(Snapshot::GpuStack, live_at_peak_bytes));
constexpr auto kGpuErrorColumns = std::make_tuple(
    PEAKLINE_COLUMN(Snapshot::GpuError, query), PEAKLINE_COLUMN(Snapshot::GpuError, code),
    PEAKLINE_COLUMN(Snapshot::GpuError, polls));

// A column's value as Python gets it: scalars and strings as nb::make_tuple casts them, a
// stack's frame ids as a tuple, a timeline as a list of TimePoint rows.
template <typename T>
const T& Value(const T& value) {
  return value;
}
nb::tuple Value(const std::vector<uint32_t>& frame_ids);
nb::list Value(const std::vector<Point>& points);

template <typename Row, typename... Columns>
nb::tuple RowOf(const Row& row, const std::tuple<Columns...>& columns) {
  return std::apply(
      [&row](const auto&... column) { return nb::make_tuple(Value(row.*(column.member))...); },
      columns);
}

template <typename Row, typename Columns>
nb::list RowsOf(const std::vector<Row>& rows, const Columns& columns) {
  nb::list out;
  for (const Row& row : rows) out.append(RowOf(row, columns));
  return out;
}

nb::tuple Value(const std::vector<uint32_t>& frame_ids) {
  nb::list ids;
  for (uint32_t id : frame_ids) ids.append(id);
  return nb::tuple(ids);
}

nb::list Value(const std::vector<Point>& points) { return RowsOf(points, kTimePointColumns); }

template <typename... Columns>
nb::tuple NamesOf(const std::tuple<Columns...>& columns) {
  return std::apply([](const auto&... column) { return nb::make_tuple(column.name...); },
                    columns);
}

// The field names of every row kind, keyed by the row's name in peakline/model/raw.py.
nb::dict RawFields() {
  nb::dict out;
  out["Frame"] = NamesOf(kFrameColumns);
  out["Stack"] = NamesOf(kStackColumns);
  out["Thread"] = NamesOf(kThreadColumns);
  out["ActivityBucket"] = NamesOf(kActivityBucketColumns);
  out["TimePoint"] = NamesOf(kTimePointColumns);
  out["MemoryStack"] = NamesOf(kMemoryStackColumns);
  out["MemoryLine"] = NamesOf(kMemoryLineColumns);
  out["GpuStack"] = NamesOf(kGpuStackColumns);
  out["GpuError"] = NamesOf(kGpuErrorColumns);
  return out;
}

// Counters travel as {name: value}: each is named once, where the core fills it in.
nb::dict StatsOf(const std::vector<std::pair<std::string, int64_t>>& stats) {
  nb::dict out;
  for (const auto& [name, value] : stats) out[name.c_str()] = value;
  return out;
}

// The snapshot is complete C++ data before the first Python object is made: making those may
// run Python (a collection, a finalizer) that touches the session.
nb::dict ToDict(const Snapshot& snap) {
  nb::dict out;
  if (snap.memory) {
    nb::dict memory;
    memory["stacks"] = RowsOf(snap.memory_stacks, kMemoryStackColumns);  // parallel to stacks
    memory["lines"] = RowsOf(snap.memory_lines, kMemoryLineColumns);
    memory["timeline"] = Value(snap.timeline);
    memory["stats"] = StatsOf(snap.memory_stats);
    out["memory"] = memory;
  }
  if (snap.gpu_requested) {
    nb::dict gpu;
    nb::list devices;
    for (const std::string& name : snap.gpu_devices) devices.append(name);
    gpu["measured"] = snap.gpu_measured;
    gpu["unavailable"] = snap.gpu_unavailable;
    gpu["devices"] = devices;
    gpu["stacks"] = RowsOf(snap.gpu_stacks, kGpuStackColumns);  // parallel to stacks
    gpu["errors"] = RowsOf(snap.gpu_errors, kGpuErrorColumns);
    gpu["stats"] = StatsOf(snap.gpu_stats);
    out["gpu"] = gpu;
  }
  nb::dict activity;
  activity["width_ns"] = snap.activity_width_ns;
  activity["buckets"] = RowsOf(snap.activity, kActivityBucketColumns);
  out["activity"] = activity;
  out["frames"] = RowsOf(snap.frames, kFrameColumns);
  out["stacks"] = RowsOf(snap.stacks, kStackColumns);
  out["threads"] = RowsOf(snap.threads, kThreadColumns);
  out["stats"] = StatsOf(snap.stats);
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

void SetDynamicCodeLocator(nb::object locator) {
  peakline::python::SetDynamicCodeLocator(locator.is_none() ? nullptr : locator.ptr());
}

nb::dict Collect() PEAKLINE_REQUIRES(gil) { return ToDict(peakline::session::CollectProfile()); }
nb::dict CollectRunning() PEAKLINE_REQUIRES(gil) {
  return ToDict(peakline::session::CollectRunningProfile());
}

}  // namespace

NB_MODULE(_core, m) {
#ifdef Py_GIL_DISABLED
  peakline::python::CoreLockObject();  // made now, on the importing thread
#endif
  m.doc() = "peakline's C++ measuring core (internal; use the peakline package API)";
  m.def("start", &Locked<&Start>::Call, nb::arg("cpu_interval_ns"), nb::arg("tick_ns"),
        nb::arg("sample_native_threads"), nb::arg("main_tid"), nb::arg("call_opcodes"),
        nb::arg("memory") = false, nb::arg("memory_sampling_interval_bytes") = 512 * 1024,
        nb::arg("copy_sampling_interval_bytes") = 2 * 1024 * 1024,
        nb::arg("file_filter") = nb::none(), nb::arg("gpu") = false,
        nb::arg("torch_probe") = nb::none());
  m.def("stop", &Locked<&Stop>::Call);
  m.def("active", &Locked<&peakline::session::ProfilerActive>::Call);
  m.def("thread_started", &Locked<&peakline::session::ThreadStarted>::Call,
        "Called by a new Python thread first thing (session/profiler.h).");
  m.def("remember_native_thread_id", &peakline::cpu::RememberNativeThreadId, nb::arg("ident"),
        nb::arg("native_id"), "threading's ident -> kernel id, for 3.10 (cpu/native_thread_ids.h).");
  m.def("thread_finishing", &Locked<&peakline::session::ThreadFinishing>::Call,
        "Called by a Python thread last thing (session/profiler.h).");
  m.def("collect", &Locked<&Collect>::Call);
  m.def("set_dynamic_code_locator", &Locked<&SetDynamicCodeLocator>::Call,
        nb::arg("locator").none());
  m.def("collect_running", &Locked<&CollectRunning>::Call,
        "The running session's data so far, same shape as collect() (session/profiler.h).");
  m.def("raw_fields", &RawFields,
        "{row kind: field names} of the rows collect() returns (peakline/model/raw.py).");
  m.def("exclude_current_thread", &Locked<&peakline::session::ExcludeCurrentThread>::Call,
        "Called by peakline's own Python threads first thing (session/profiler.h).");
  m.def("reset_after_fork", &Locked<&peakline::session::ResetAfterForkInChild>::Call);
  m.def("watch_signal", &WatchSignal, nb::arg("signo"),
        "Make sure the Python handler of this signal runs (session/signal_watch.h).");
  m.def("release_process", &Locked<&ReleaseProcess>::Call, nb::arg("wait_ms"),
        "After stop: take out the process hooks and the signal handler ('' or why not).");
  m.def("attach_probe", &AttachProbe, nb::arg("pid"),
        "(error, python_object, version_hex) of a process to attach to (attach/ptrace_injector.h).");
  m.def("attach_inject", &AttachInject, nb::arg("pid"), nb::arg("code"), nb::arg("wait_ms"),
        "Runs Python code in another CPython process: (error, mode, page) (attach/ptrace_injector.h).");
  m.def("attach_release_page", &ReleasePage, nb::arg("address"),
        nb::arg("length"), "munmap of the page the attach code came in; 0 or errno.");
  m.def("attach_page_placeholder", []() { return std::string(peakline::attach::kPagePlaceholder); });
  m.def("signal_handled", &peakline::session::SignalHandled, nb::arg("signo"));
  m.def("python_frees_probed", &peakline::hooks::PythonFreesProbed,
        "Whether this session's Python-domain frees probe the sampled-pointer table "
        "(hooks/python_domain.h: probe mode).");
}
