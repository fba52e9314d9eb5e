// SessionHarness: a sampling session whose GIL-side aggregation the test drives by hand, in an
// embedded interpreter (session/sampling_session.h, aggregate/memory_aggregator.h).
//
// Real: the interpreter, its code objects, and the frames — read from Python functions the
// tests call, by the same readers the signal handler and the allocation hooks use (a thread's
// own stack, and the main thread's stack as another thread reads it); the session's code
// resolver, file filter, stitching to the main thread, CPU and memory aggregation and, when
// a test installs it, the code-object deallocation hook. Synthetic: the memory events and the
// CPU samples. The test writes memory events into a ring of its own
// (SamplingSessionConfig::memory_events), and CPU samples into the ring of a thread's slot
// (SamplingSession::SlotForTesting), in the order it chooses, with the times it chooses; a
// tick drains them — called from Python, so that the main thread is on a known line when it
// runs.
//
// The session is not started (no tick thread, no stager thread) unless a test starts it; its
// main thread is the test's. Its first tick arms a CPU timer for it, with a signal whose default action is to
// ignore it (SIGURG) and an hour-long interval: no sample ever disturbs a test.
#ifndef PEAKLINE_TESTS_NATIVE_SESSION_HARNESS_H_
#define PEAKLINE_TESTS_NATIVE_SESSION_HARNESS_H_

// Python.h first (it sets feature macros the standard headers read).
#include "session/sampling_session.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cpu/native_thread_ids.h"
#include "cpu/thread_cpu_timer.h"
#include "embedded_python.h"
#include "python/python_frames.h"
#include "transport/memory_event.h"
#include "transport/mpsc_ring.h"
#include "transport/sample_record.h"

namespace peakline::session {

using aggregate::LineMemory;
using aggregate::StackCounters;
using aggregate::StackRow;
using aggregate::StackTable;
using cpu::CurrentTid;
using cpu::MonotonicNowNs;
using transport::MemoryEventType;
using transport::MpscRing;
using transport::RawFrame;

inline constexpr int64_t kMs = 1'000'000;

// The programs the tests run. Lines are named by the tests as "file:line": keep them in sync.
// lib.py is a library (not the user's code); user.py and dynamic.py are the user's.
inline constexpr const char* kLibPy = R"PY(def via_one(key):
    return record(key)
def via_two(key):
    return record(key)
)PY";

inline constexpr const char* kUserPy = R"PY(def site_a():
    return record("a")
def site_b():
    return record("b")
def site_shared(one):
    return via_one("shared1") if one else via_two("shared2")
def tick_x():
    return tick()
def tick_y():
    return tick()
def main_now():
    return record("main")
)PY";

// Code objects that live and die on the tests' command: make_code compiles src as dynamic.py,
// calls its function `name` once (which records its stack under that name) and keeps only the
// function's code object, in `kept`; free_codes drops it (the last reference: the object is
// deallocated then and there). The deallocation runs a weak-reference callback, as it would
// any code run during it (a sample, an allocation): it logs "freed NAME" and, with
// push_when_freed, queues an allocation event with the stack recorded under `name` (and with
// sample_when_freed, a CPU sample of the main thread with that stack). The file
// filter, reported(), logs "asked FILE" for every file it is asked about.
inline constexpr const char* kHarnessPy = R"PY(import weakref
kept, refs, on_filter, log = [], [], [], []
def make_code(src, name, push_when_freed=False, sample_when_freed=False):
    ns = {}
    exec(compile(src, "dynamic.py", "exec"), ns)
    ns[name]()
    code = ns[name].__code__
    kept.append(code)
    def when_freed(ref):
        log.append("freed " + name)
        if push_when_freed:
            alloc(name, 0x7000, 8)
        if sample_when_freed:
            sample(name)
    refs.append(weakref.ref(code, when_freed))
    ns.clear()
def free_codes():
    kept.clear()
def freed():
    return all(ref() is None for ref in refs)
def free_codes_at_next_filter_call():
    on_filter.append(free_codes)
def reported(filename):
    log.append("asked " + filename)
    while on_filter:
        on_filter.pop()()
    return filename in ("user.py", "dynamic.py")
)PY";

inline constexpr const char* kDoomedPy = R"PY(def doomed():
    return record("doomed")
)PY";

// A live thread of the process other than the main one, blocked until destroyed: the session
// gives it a slot (and an hour-long timer) like any native thread it finds.
class BlockedThread {
 public:
  BlockedThread() {
    std::promise<pid_t> tid;
    thread_ = std::thread([this, &tid] {
      tid.set_value(cpu::CurrentTid());
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return done_; });
    });
    tid_ = tid.get_future().get();
  }
  ~BlockedThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  BlockedThread(const BlockedThread&) = delete;
  BlockedThread& operator=(const BlockedThread&) = delete;
  pid_t tid() const { return tid_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  pid_t tid_ = 0;
  std::thread thread_;
};

class SessionHarness : public testing::Test {
 protected:
  // A thread other than the main one: memory events carry a thread id, and nothing in the
  // session's memory path needs that thread to exist.
  static constexpr pid_t kWorker = 4'000'000;

  struct Recorded {
    std::vector<RawFrame> own;      // the stack as its own thread reads it
    std::vector<RawFrame> as_main;  // as another thread reads it (kForeignFrame frames)
  };

  static void SetUpTestSuite() {
    ASSERT_EQ(testing_support::StartEmbeddedPython(), "");
    cpu::RememberNativeThreadId(static_cast<unsigned long>(pthread_self()), CurrentTid());  // 3.10
    PyObject* builtins = PyImport_ImportModule("builtins");
    ASSERT_NE(builtins, nullptr);
    static PyMethodDef defs[] = {{"record", Record, METH_O, nullptr},
                                 {"tick", Tick, METH_NOARGS, nullptr},
                                 {"alloc", AllocFromPython, METH_VARARGS, nullptr},
                                 {"sample", SampleFromPython, METH_O, nullptr}};
    for (PyMethodDef& def : defs) {
      PyObject* fn = PyCFunction_New(&def, nullptr);
      PyObject_SetAttrString(builtins, def.ml_name, fn);
      Py_DECREF(fn);
    }
    Py_DECREF(builtins);
    lib_ = Load(kLibPy, "lib.py", nullptr);
    harness_ = Load(kHarnessPy, "harness.py", nullptr);
    user_ = Load(kUserPy, "user.py", lib_);
    ASSERT_TRUE(lib_ && harness_ && user_);
  }
  static void TearDownTestSuite() {
    if (Py_IsInitialized()) Py_FinalizeEx();
  }

  void SetUp() override {
    recorded().clear();
    ring_ = std::make_unique<MpscRing>(64 * 1024);
    SamplingSessionConfig c;
    c.cpu_interval_ns = 3600'000'000'000;  // never fires in a test
    c.sample_native_threads = false;
    c.main_tid = CurrentTid();
    c.signo = SIGURG;  // default action: ignored
    c.memory = true;
    c.memory_events = ring_.get();
    c.file_filter = PyDict_GetItemString(harness_, "reported");  // borrowed
    c.start_ns = MonotonicNowNs();
    session_ = std::make_unique<SamplingSession>(c);
    current_ = session_.get();
  }
  void TearDown() override {
    current_ = nullptr;
    session_.reset();
    ring_.reset();
  }

  // Calls function `fn` of namespace ns; format and the rest build its arguments (as
  // Py_BuildValue does, always a tuple: "(si)"). Returns whether the result is true.
  static bool Call(PyObject* ns, const char* fn, const char* format = nullptr, ...) {
    PyObject* f = PyDict_GetItemString(ns, fn);  // borrowed
    EXPECT_NE(f, nullptr) << fn;
    if (f == nullptr) return false;
    PyObject* args = nullptr;
    if (format != nullptr) {
      va_list va;
      va_start(va, format);
      args = Py_VaBuildValue(format, va);
      va_end(va);
    } else {
      args = PyTuple_New(0);
    }
    PyObject* result = args != nullptr ? PyObject_Call(f, args, nullptr) : nullptr;
    Py_XDECREF(args);
    if (result == nullptr) {
      PyErr_Print();
      ADD_FAILURE() << fn << "() raised";
      return false;
    }
    const bool truth = PyObject_IsTrue(result) == 1;
    Py_DECREF(result);
    return truth;
  }

  // Records the stacks the tests name: "a" (user.py:2), "b" (user.py:4), "shared1" (lib.py:2
  // under user.py:6), "shared2" (lib.py:4 under user.py:6), "lib" (lib.py:2 alone) and
  // "main" (user.py:12).
  static void RecordStacks() {
    ASSERT_FALSE(Call(user_, "site_a"));
    ASSERT_FALSE(Call(user_, "site_b"));
    ASSERT_FALSE(Call(user_, "site_shared", "(i)", 1));
    ASSERT_FALSE(Call(user_, "site_shared", "(i)", 0));
    ASSERT_FALSE(Call(lib_, "via_one", "(s)", "lib"));
    ASSERT_FALSE(Call(user_, "main_now"));
  }

  // What harness.py logged since the last call (and forgets it).
  static std::vector<std::string> TakeLog() {
    std::vector<std::string> out;
    PyObject* log = PyDict_GetItemString(harness_, "log");  // borrowed
    for (Py_ssize_t i = 0; log != nullptr && i < PyList_Size(log); ++i) {
      out.emplace_back(PyUnicode_AsUTF8(PyList_GetItem(log, i)));
    }
    if (log != nullptr) PyList_SetSlice(log, 0, PyList_Size(log), nullptr);
    return out;
  }

  static std::map<std::string, Recorded>& recorded() {
    static auto* r = new std::map<std::string, Recorded>();
    return *r;
  }
  static const std::vector<RawFrame>& Own(const std::string& key) { return Get(key).own; }
  static const std::vector<RawFrame>& AsMain(const std::string& key) { return Get(key).as_main; }
  static std::vector<RawFrame> Concat(std::vector<RawFrame> a, const std::vector<RawFrame>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // Events, queued in the session's ring (drained at the next tick, or by the operation that a
  // code object's deallocation starts).
  // size: the block's own bytes (default: weight, a block counted exactly).
  static void Alloc(pid_t tid, uint64_t address, int64_t weight,
                    const std::vector<RawFrame>& frames, uint8_t domain = transport::kDomainPython,
                    int64_t size = -1) {
    Push(MemoryEventType::kAlloc, tid, address, weight, frames, domain, size);
  }
  static void Free(uint64_t address) {
    Push(MemoryEventType::kFree, CurrentTid(), address, 0, {}, transport::kDomainNative);
  }
  static void Peak() { Push(MemoryEventType::kPeak, CurrentTid(), 0, 0, {}, 0); }

  // A CPU sample of thread tid (a live thread: its slot is registered if it has none), queued
  // in that slot's ring as the signal handler writes one (transport/sample_record.h): cpu_ns
  // of CPU since its previous sample, system_ns of it in the kernel, taken at wall_ns (0: no
  // time, as without a stack capture).
  static void Sample(pid_t tid, transport::SampleKind kind, int64_t cpu_ns, int64_t system_ns,
                     const std::vector<RawFrame>& frames, int64_t wall_ns = 0,
                     uint8_t flags = 0, int32_t invalid_frames = 0) {
    cpu::ThreadSlot* slot = current_->SlotForTesting(tid);
    ASSERT_NE(slot, nullptr) << "thread " << tid << " cannot be registered";
    const transport::SampleHeader h{.cpu_delta_ns = cpu_ns,
                                    .system_delta_ns = system_ns,
                                    .nframes = static_cast<uint16_t>(frames.size()),
                                    .kind = kind,
                                    .flags = flags,
                                    .invalid_frames = invalid_frames,
                                    .wall_ns = wall_ns};
    static const RawFrame kNone[1] = {};
    EXPECT_TRUE(slot->ring.TryWrite(&h, sizeof(h), frames.empty() ? kNone : frames.data(),
                                    static_cast<uint32_t>(frames.size() * sizeof(RawFrame))))
        << "the thread's sample ring is full";
  }

  // "file:line" of each frame of a stack, leaf first.
  std::vector<std::string> Lines(const std::vector<uint32_t>& frame_ids) const {
    const StackTable& t = session_->table();
    std::vector<std::string> out;
    for (uint32_t id : frame_ids) {
      const aggregate::FrameKey& f = t.frames()[id];
      out.push_back(t.strings()[f.file_id] + ":" + std::to_string(f.lineno));
    }
    return out;
  }
  // The stacks of thread tid that allocations (CPU samples) were charged to, in the order they
  // appeared.
  std::vector<std::vector<std::string>> AllocStacks(pid_t tid) const {
    return StacksWhere(tid, [](const StackCounters& c) { return c.alloc_samples > 0; });
  }
  std::vector<std::vector<std::string>> CpuStacks(pid_t tid) const {
    return StacksWhere(tid, [](const StackCounters& c) { return c.cpu_samples > 0; });
  }
  // The counters of thread tid's stack made of exactly these frames ("file:line", leaf first).
  const StackCounters& Stack(pid_t tid, const std::vector<std::string>& lines) const {
    for (const StackRow& row : session_->table().stacks()) {
      if (row.tid == tid && Lines(row.frames) == lines) return row.counters;
    }
    ADD_FAILURE() << "no stack " << testing::PrintToString(lines) << " for thread " << tid;
    static const StackCounters none{};
    return none;
  }
  // The memory of one line of the user's code ("file:line").
  const LineMemory& Line(const std::string& where) const {
    const StackTable& t = session_->table();
    for (const LineMemory& l : session_->memory()->lines()) {
      if (t.strings()[l.file_id] + ":" + std::to_string(l.lineno) == where) return l;
    }
    ADD_FAILURE() << "no line " << where;
    static const LineMemory none{};
    return none;
  }
  int64_t LiveAtPeak(pid_t tid, const std::vector<std::string>& lines) const {
    return session_->memory()->LiveAtPeak(Stack(tid, lines));
  }
  double LiveAtPeakVariance(pid_t tid, const std::vector<std::string>& lines) const {
    return session_->memory()->LiveAtPeakVariance(Stack(tid, lines));
  }
  int64_t LiveAtPeak(const std::string& where) const {
    return session_->memory()->LiveAtPeak(Line(where));
  }

  static inline PyObject* lib_ = nullptr;      // globals of lib.py (kept for the whole run)
  static inline PyObject* user_ = nullptr;     // of user.py
  static inline PyObject* harness_ = nullptr;  // of harness.py
  static inline SamplingSession* current_ = nullptr;  // what tick() and alloc() drive
  static inline std::unique_ptr<MpscRing> ring_;
  std::unique_ptr<SamplingSession> session_;

 private:
  // Runs src as file `name` in a new namespace (with lib's functions when `with` is given).
  // The module's code object is kept alive: nothing a test records may name a freed one.
  static PyObject* Load(const char* src, const char* name, PyObject* with) {
    PyObject* ns = PyDict_New();
    PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins());
    if (with != nullptr) PyDict_Update(ns, with);
    PyObject* code = Py_CompileString(src, name, Py_file_input);
    PyObject* result = code != nullptr ? PyEval_EvalCode(code, ns, ns) : nullptr;
    if (result == nullptr) {
      PyErr_Print();
      return nullptr;
    }
    Py_DECREF(result);
    return ns;  // code leaked on purpose, with ns
  }

  template <typename Pred>
  std::vector<std::vector<std::string>> StacksWhere(pid_t tid, Pred pred) const {
    std::vector<std::vector<std::string>> out;
    for (const StackRow& row : session_->table().stacks()) {
      if (row.tid == tid && pred(row.counters)) out.push_back(Lines(row.frames));
    }
    return out;
  }

  static const Recorded& Get(const std::string& key) {
    auto it = recorded().find(key);
    if (it == recorded().end()) {
      ADD_FAILURE() << "no stack recorded as " << key;
      static const Recorded none{};
      return none;
    }
    return it->second;
  }

  static void Push(MemoryEventType type, pid_t tid, uint64_t address, int64_t weight,
                   const std::vector<RawFrame>& frames, uint8_t domain, int64_t size = -1) {
    transport::MemoryEvent ev{};
    ev.type = type;
    ev.domain = domain;
    ev.nframes = static_cast<uint16_t>(frames.size());
    ev.tid = tid;
    ev.address = address;
    ev.size = size < 0 ? weight : size;
    ev.weight = weight;
    ev.time_ns = MonotonicNowNs();
    static const RawFrame kNone[1] = {};  // never a null source, even for no bytes (as the hooks)
    const bool written =
        ring_->TryWrite(&ev, sizeof(ev), frames.empty() ? kNone : frames.data(),
                        static_cast<uint32_t>(frames.size() * sizeof(RawFrame)));
    EXPECT_TRUE(written) << "the test's event ring is full";
  }

  // record(key): stores the calling Python stack under key, read both ways.
  static PyObject* Record(PyObject*, PyObject* key) {
    const char* k = PyUnicode_AsUTF8(key);
    if (k == nullptr) return nullptr;
    constexpr int kMax = transport::kMaxFrames;
    RawFrame frames[kMax];
    Recorded r;
    const python::StackRead own = python::ReadPythonStack(PyThreadState_Get(), frames, kMax);
    r.own.assign(frames, frames + own.nframes);
    const python::StackRead other = python::ReadOtherThreadStack(PyThreadState_Get(), frames, kMax);
    r.as_main.assign(frames, frames + other.nframes);
    recorded()[k] = std::move(r);
    Py_RETURN_NONE;
  }
  // tick(): one tick of the session, now; returns whether it ran (not skipped).
  static PyObject* Tick(PyObject*, PyObject*) {
    if (current_ == nullptr) Py_RETURN_FALSE;
    const int64_t before = current_->stats().ticks;
    current_->CatchUp();
    return PyBool_FromLong(current_->stats().ticks > before);
  }
  // alloc(key, address, weight): an allocation by the main thread, with the stack recorded as key.
  static PyObject* AllocFromPython(PyObject*, PyObject* args) {
    const char* key;
    unsigned long long address;
    long long weight;
    if (!PyArg_ParseTuple(args, "sKL", &key, &address, &weight)) return nullptr;
    Alloc(CurrentTid(), address, weight, Own(key));
    Py_RETURN_NONE;
  }
  // sample(key): a CPU sample of the main thread (1 ms of Python), with the stack recorded as key.
  static PyObject* SampleFromPython(PyObject*, PyObject* key) {
    const char* k = PyUnicode_AsUTF8(key);
    if (k == nullptr) return nullptr;
    Sample(CurrentTid(), transport::SampleKind::kPython, 1'000'000, 0, Own(k));
    Py_RETURN_NONE;
  }
};

}  // namespace peakline::session

#endif  // PEAKLINE_TESTS_NATIVE_SESSION_HARNESS_H_
