#include "engine/profiler.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <memory>

#include "engine/aggregator.h"
#include "engine/code_regions.h"
#include "engine/cpu_signal_handler.h"
#include "engine/python_frames.h"

namespace peakline::engine {

namespace {

// Read by the signal handler: written only while sampling is off (before the handler is
// enabled), so plain globals are enough.
CodeRegionMap g_regions;
bool g_call_opcodes[256];

std::unique_ptr<Aggregator> g_session;     // guarded by the GIL
std::unique_ptr<Aggregator> g_finished;    // the last stopped session, until collected
bool g_regions_ready = false;

// StackCapture for Python threads: async-signal-safe (see python_frames.h).
void CapturePythonStack(uintptr_t pc, RawFrame* frames, int max_frames, SampleHeader* header) {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == nullptr) {
    header->kind = SampleKind::kNoThread;
    return;
  }
  const StackRead r = ReadPythonStack(ts, frames, max_frames);
  header->nframes = static_cast<uint16_t>(r.nframes);
  header->invalid_frames = r.invalid;
  if (r.truncated) header->flags |= kFlagTruncated;
  bool native;
  switch (g_regions.Classify(pc)) {
    case CodeRegion::kEvalLoop:
      native = false;
      break;
    case CodeRegion::kOther:
      native = true;
      break;
    default:  // libpython outside the eval loop, or libc: what is the current op doing?
      native = r.top_opcode >= 0 && g_call_opcodes[r.top_opcode];
      break;
  }
  header->kind = native ? SampleKind::kNative : SampleKind::kPython;
}

void BeforeCodeFreed(PyObject* code) {
  if (g_session) g_session->BeforeCodeFreed(code);
}

void SetUpRegions() {
  if (g_regions_ready) return;
  // Order matters: the first matching range wins.
  g_regions.AddSymbolContaining(reinterpret_cast<const void*>(&_PyEval_EvalFrameDefault),
                                CodeRegion::kEvalLoop);
  g_regions.AddObjectContaining(reinterpret_cast<const void*>(&PyEval_EvalCode),
                                CodeRegion::kInterpreter);
  g_regions.AddObjectContaining(reinterpret_cast<const void*>(&strlen), CodeRegion::kNeutral);
  g_regions_ready = true;
}

}  // namespace

std::string StartProfiler(const ProfilerConfig& config) {
  if (g_session) return "peakline is already profiling this process";
  if (config.cpu_interval_ns < 1'000'000) return "the CPU sampling interval must be at least 1 ms";
  if (const char* problem = SelfCheckFrameLayout()) {
    return std::string("cannot read this interpreter's frames: ") + problem;
  }
  SetUpRegions();
  for (int i = 0; i < 256; ++i) g_call_opcodes[i] = config.call_opcodes[i];

  AggregatorConfig ac;
  ac.cpu_interval_ns = config.cpu_interval_ns;
  ac.tick_ns = config.tick_ns;
  ac.sample_native_threads = config.sample_native_threads;
  ac.main_tid = config.main_tid;
  ac.signo = CpuSamplingSignal();
  if (int err = InstallCpuSignalHandler(ac.signo, CapturePythonStack); err != 0) {
    return std::string("cannot install the sampling signal handler: ") + std::strerror(err);
  }
  g_finished.reset();
  g_session = std::make_unique<Aggregator>(ac);
  InstallCodeDeallocHook(BeforeCodeFreed);
  SetCpuSamplingEnabled(true);
  g_session->Start();
  return "";
}

std::string StopProfiler() {
  if (!g_session) return "peakline is not profiling";
  SetCpuSamplingEnabled(false);
  WaitForCpuHandlersIdle();
  Py_BEGIN_ALLOW_THREADS
  g_session->StopThread();
  Py_END_ALLOW_THREADS
  g_session->Drain(/*measure_wait=*/true);
  UninstallCodeDeallocHook();
  g_finished = std::move(g_session);
  return "";
}

bool ProfilerActive() { return g_session != nullptr; }

Snapshot CollectProfile() {
  Snapshot snap;
  if (!g_finished) return snap;
  const profile::StackTable& table = g_finished->table();
  const auto& strings = table.strings();
  for (const profile::FrameKey& f : table.frames()) {
    snap.frames.emplace_back(strings[f.file_id], strings[f.function_id], f.first_lineno, f.lineno);
  }
  for (const profile::StackRow& row : table.stacks()) {
    const profile::StackCounters& c = row.counters;
    snap.stacks.push_back(Snapshot::Stack{row.tid, row.frames, c.cpu_python_ns, c.cpu_native_ns,
                                          c.cpu_system_ns, c.wait_ns, c.cpu_samples,
                                          c.wait_samples});
  }
  for (const ThreadSummary& t : g_finished->Threads()) {
    snap.threads.emplace_back(t.tid, t.python, t.cpu_ns, t.wait_ns);
  }
  const AggregatorStats& s = g_finished->stats();
  snap.stats = {{"cpu_samples", s.cpu_samples},
                {"wait_samples", s.wait_samples},
                {"dropped_samples", g_finished->DroppedSamples()},
                {"invalid_frames", s.invalid_frames},
                {"truncated_stacks", s.truncated_stacks},
                {"ticks", s.ticks},
                {"timer_errors", s.timer_errors},
                {"cpu_interval_ns", g_finished->config().cpu_interval_ns},
                {"tick_interval_ns", g_finished->config().tick_ns}};
  return snap;
}

}  // namespace peakline::engine
