// ReadPythonStack / SelfCheckFrameLayout (python/python_frames.h) against a real, embedded
// interpreter: Python code calls a C function that reads the stack through the mirror.
#include "python/python_frames.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <thread>

#include <string>
#include <utility>
#include <vector>

#include "embedded_python.h"

namespace peakline::python {

using transport::RawFrame;
using transport::kMaxFrames;

namespace {

#if PY_VERSION_HEX >= 0x030B0000
const _Py_CODEUNIT* CodeUnits(PyCodeObject* code) { return _PyCode_CODE(code); }
int FrameLastiBytes(PyFrameObject* frame) { return PyFrame_GetLasti(frame); }  // 3.11+
int32_t CodeUnitCount(PyObject* code) { return static_cast<int32_t>(Py_SIZE(code)); }
#else
// 3.10: the instructions are co_code's bytes; the frame object's f_lasti counts code units.
const _Py_CODEUNIT* CodeUnits(PyCodeObject* code) {
  return reinterpret_cast<const _Py_CODEUNIT*>(PyBytes_AS_STRING(code->co_code));
}
int FrameLastiBytes(PyFrameObject* frame) { return frame->f_lasti < 0 ? -1 : frame->f_lasti * 2; }
int32_t CodeUnitCount(PyObject* code) {
  return static_cast<int32_t>(PyBytes_GET_SIZE(reinterpret_cast<PyCodeObject*>(code)->co_code) / 2);
}
#endif

// capture(max) -> ([(code, line, opcode at lasti, lasti*2 == frame.f_lasti), ...] leaf first,
//                  invalid, truncated, top_opcode, problem)
// Both reading modes must see the same stack; the racy one (the CPU signal handler's) copies
// every frame through process_vm_readv. Set by the racy_agrees assertion below.
int g_racy_disagreements = 0;
// The same for the other-thread reader, used here on the calling thread's own state.
int g_foreign_disagreements = 0;

PyObject* Capture(PyObject*, PyObject* arg) {
  const long max = PyLong_AsLong(arg);
  if (max == -1 && PyErr_Occurred()) return nullptr;
  RawFrame frames[kMaxFrames];
  const StackRead r = ReadPythonStack(PyThreadState_Get(), frames, static_cast<int>(max));
  RawFrame racy_frames[kMaxFrames];
  const StackRead racy =
      ReadPythonStack(PyThreadState_Get(), racy_frames, static_cast<int>(max), /*racy=*/true);
  bool agree = racy.nframes == r.nframes && racy.invalid == r.invalid &&
               racy.truncated == r.truncated && racy.top_opcode == r.top_opcode;
  for (int i = 0; agree && i < r.nframes; ++i) {
    agree = racy_frames[i].code == frames[i].code && racy_frames[i].lasti == frames[i].lasti;
  }
  if (!agree) ++g_racy_disagreements;
  RawFrame foreign_frames[kMaxFrames];
  const StackRead foreign =
      ReadOtherThreadStack(PyThreadState_Get(), foreign_frames, static_cast<int>(max));
  bool foreign_agrees = foreign.nframes == r.nframes && foreign.invalid == r.invalid &&
                        foreign.truncated == r.truncated;
  for (int i = 0; foreign_agrees && i < r.nframes; ++i) {
    foreign_agrees = foreign_frames[i].code == frames[i].code &&
                     foreign_frames[i].lasti == frames[i].lasti &&
                     foreign_frames[i].reserved == kForeignFrame &&
                     ForeignCodeLooksAlive(foreign_frames[i]);
  }
  if (!foreign_agrees) ++g_foreign_disagreements;
  const Status check = SelfCheckFrameLayout();
  const char* problem = check.ok() ? nullptr : check.message().c_str();
  PyObject* list = PyList_New(0);
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());  // new reference
  for (int i = 0; i < r.nframes; ++i) {
    auto* code = reinterpret_cast<PyCodeObject*>(const_cast<void*>(frames[i].code));
    const int line = PyCode_Addr2Line(code, frames[i].lasti * 2);
    const int opcode =
        frames[i].lasti < 0
            ? -1  // low byte of the code unit (little-endian), as ReadPythonStack reads it
            : reinterpret_cast<const uint8_t*>(CodeUnits(code) + frames[i].lasti)[0];
    // The interpreter's own view of the frame: byte offset of the instruction, which the
    // mirror must reproduce exactly.
    const bool same_lasti = frame != nullptr && FrameLastiBytes(frame) == frames[i].lasti * 2;
    PyObject* item = Py_BuildValue("(OiiO)", reinterpret_cast<PyObject*>(code), line, opcode,
                                   same_lasti ? Py_True : Py_False);
    PyList_Append(list, item);
    Py_DECREF(item);
    if (frame != nullptr) {
      PyFrameObject* back = PyFrame_GetBack(frame);
      Py_DECREF(frame);
      frame = back;
    }
  }
  Py_XDECREF(frame);
  return Py_BuildValue("(NiOiz)", list, r.invalid, r.truncated ? Py_True : Py_False,
                       r.top_opcode, problem);
}

PyMethodDef g_capture_def = {"capture", Capture, METH_O, nullptr};

// from_thread() -> number of frames another (non-Python) thread reads from the caller's
// stack while the caller waits for it, or -1 if they differ from the caller's own reading.
PyObject* FromThread(PyObject*, PyObject*) {
  PyThreadState* ts = PyThreadState_Get();
  RawFrame own[kMaxFrames];
  const StackRead r = ReadPythonStack(ts, own, kMaxFrames);
  RawFrame other[kMaxFrames];
  StackRead o;
  std::thread reader([&] { o = ReadOtherThreadStack(ts, other, kMaxFrames); });
  reader.join();
  if (o.nframes != r.nframes || o.invalid != 0) return PyLong_FromLong(-1);
  for (int i = 0; i < r.nframes; ++i) {
    if (other[i].code != own[i].code || other[i].lasti != own[i].lasti) return PyLong_FromLong(-1);
  }
  return PyLong_FromLong(r.nframes);
}

PyMethodDef g_from_thread_def = {"from_thread", FromThread, METH_NOARGS, nullptr};

// Line numbers below are referred to by the tests; keep them in sync.
constexpr const char* kProgram = R"PY(import dis
def inner(n):
    return capture(n)
def outer(n):
    x = n
    return inner(x)
def gen():
    yield capture(128)
class C:
    def method(self):
        return capture(128)
def recurse(k):
    if k == 0:
        return capture(128)
    return recurse(k - 1)
first = outer(128)
for _ in range(50):  # let the interpreter specialise (quicken) the call sites
    warm = outer(128)
short = outer(2)
in_gen = next(gen())
in_method = C().method()
deep = recurse(40)
top_name = getattr(dis, "_all_opname", dis.opname)[warm[3]]  # 3.10: no _all_opname
)PY";

class PythonFramesTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(testing_support::StartEmbeddedPython(), "");
    main_ = PyImport_AddModule("__main__");  // borrowed
    globals_ = PyModule_GetDict(main_);      // borrowed
    PyObject* fn = PyCFunction_New(&g_capture_def, nullptr);
    PyDict_SetItemString(globals_, "capture", fn);
    Py_DECREF(fn);
    fn = PyCFunction_New(&g_from_thread_def, nullptr);
    PyDict_SetItemString(globals_, "from_thread", fn);
    Py_DECREF(fn);
    PyObject* res = PyRun_String(kProgram, Py_file_input, globals_, globals_);
    if (res == nullptr) PyErr_Print();
    ASSERT_NE(res, nullptr);
    Py_DECREF(res);
  }
  static void TearDownTestSuite() {
    if (Py_IsInitialized()) Py_FinalizeEx();
  }

  struct Result {
    std::vector<std::pair<PyObject*, int>> frames;  // borrowed code objects, lines
    std::vector<std::string> opnames;               // instruction at each frame's lasti
    std::vector<bool> same_lasti;                   // lasti agrees with PyFrame_GetLasti
    int invalid = -1;
    bool truncated = false;
    int top_opcode = -2;
    std::string problem;
  };

  static Result Get(const char* name) {
    Result out;
    PyObject* t = PyDict_GetItemString(globals_, name);  // borrowed
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return out;
    PyObject* list = PyTuple_GetItem(t, 0);
    for (Py_ssize_t i = 0; i < PyList_Size(list); ++i) {
      PyObject* item = PyList_GetItem(list, i);
      out.frames.emplace_back(PyTuple_GetItem(item, 0),
                              static_cast<int>(PyLong_AsLong(PyTuple_GetItem(item, 1))));
      out.opnames.push_back(OpName(static_cast<int>(PyLong_AsLong(PyTuple_GetItem(item, 2)))));
      out.same_lasti.push_back(PyTuple_GetItem(item, 3) == Py_True);
    }
    out.invalid = static_cast<int>(PyLong_AsLong(PyTuple_GetItem(t, 1)));
    out.truncated = PyTuple_GetItem(t, 2) == Py_True;
    out.top_opcode = static_cast<int>(PyLong_AsLong(PyTuple_GetItem(t, 3)));
    PyObject* problem = PyTuple_GetItem(t, 4);
    out.problem = problem == Py_None ? "" : PyUnicode_AsUTF8(problem);
    return out;
  }

  static std::string OpName(int opcode) {
    if (opcode < 0 || opcode > 255) return "<none>";
    PyObject* dis = PyImport_ImportModule("dis");
    // 3.10 has no specialised opcodes, and no _all_opname.
    const char* table = dis && PyObject_HasAttrString(dis, "_all_opname") ? "_all_opname" : "opname";
    PyObject* names = dis ? PyObject_GetAttrString(dis, table) : nullptr;
    PyObject* name = names ? PySequence_GetItem(names, opcode) : nullptr;
    std::string s = name ? PyUnicode_AsUTF8(name) : "?";
    Py_XDECREF(name);
    Py_XDECREF(names);
    Py_XDECREF(dis);
    return s;
  }

  // Each frame's lasti is the interpreter's own (PyFrame_GetLasti), and the leaf frame is in
  // the middle of calling capture(): PRECALL/CALL or a specialisation of them (3.11). (Callers'
  // lasti may point into their CALL's inline cache in 3.11, as CPython's f_lasti does.)
  static void ExpectAllAtCalls(const Result& r) {
    ASSERT_FALSE(r.opnames.empty());
    const std::string& op = r.opnames[0];
    EXPECT_TRUE(op.rfind("CALL", 0) == 0 || op.rfind("PRECALL", 0) == 0) << "leaf is at " << op;
    for (size_t i = 0; i < r.same_lasti.size(); ++i) {
      EXPECT_TRUE(r.same_lasti[i]) << "frame " << i << ": lasti differs from PyFrame_GetLasti";
    }
  }

  // The code object of global function `name` (or of "Class.method").
  static PyObject* CodeOf(const char* name) {
    PyObject* obj = PyRun_String(name, Py_eval_input, globals_, globals_);
    EXPECT_NE(obj, nullptr) << name;
    if (obj == nullptr) return nullptr;
    PyObject* code = PyObject_GetAttrString(obj, "__code__");
    Py_DECREF(obj);
    Py_XDECREF(code);  // still referenced by the function
    return code;
  }

  static std::string Name(PyObject* code) {
    PyObject* n = PyObject_GetAttrString(code, "co_name");
    std::string s = n ? PyUnicode_AsUTF8(n) : "?";
    Py_XDECREF(n);
    return s;
  }

  static PyObject* main_;
  static PyObject* globals_;
};

PyObject* PythonFramesTest::main_ = nullptr;
PyObject* PythonFramesTest::globals_ = nullptr;

TEST_F(PythonFramesTest, ReadsFunctionsAndLinesLeafFirst) {
  const Result r = Get("first");
  ExpectAllAtCalls(r);
  EXPECT_EQ(r.problem, "");
  EXPECT_EQ(r.invalid, 0);
  EXPECT_FALSE(r.truncated);
  ASSERT_EQ(r.frames.size(), 3u);
  EXPECT_EQ(r.frames[0].first, CodeOf("inner"));
  EXPECT_EQ(r.frames[0].second, 3);
  EXPECT_EQ(r.frames[1].first, CodeOf("outer"));
  EXPECT_EQ(r.frames[1].second, 6);
  EXPECT_EQ(Name(r.frames[2].first), "<module>");
  EXPECT_EQ(r.frames[2].second, 16);
}

TEST_F(PythonFramesTest, QuickenedCodeReadsTheSame) {
  const Result r = Get("warm");
  ExpectAllAtCalls(r);
  EXPECT_EQ(r.problem, "");
  ASSERT_EQ(r.frames.size(), 3u);
  EXPECT_EQ(r.frames[0].first, CodeOf("inner"));
  EXPECT_EQ(r.frames[0].second, 3);
  EXPECT_EQ(r.frames[1].second, 6);
  EXPECT_EQ(r.frames[2].second, 18);
  // The leaf frame is executing a call (PRECALL/CALL or a specialisation of them).
  PyObject* top = PyDict_GetItemString(globals_, "top_name");
  ASSERT_NE(top, nullptr);
  const std::string top_name = PyUnicode_AsUTF8(top);
  EXPECT_TRUE(top_name.rfind("CALL", 0) == 0 || top_name.rfind("PRECALL", 0) == 0) << top_name;
}

TEST_F(PythonFramesTest, TruncatesAtMax) {
  const Result r = Get("short");
  ExpectAllAtCalls(r);
  EXPECT_TRUE(r.truncated);
  ASSERT_EQ(r.frames.size(), 2u);
  EXPECT_EQ(r.frames[0].first, CodeOf("inner"));
  EXPECT_EQ(r.frames[1].first, CodeOf("outer"));
  EXPECT_GE(r.top_opcode, 0);
}

TEST_F(PythonFramesTest, GeneratorAndMethodFrames) {
  const Result g = Get("in_gen");
  ExpectAllAtCalls(g);
  EXPECT_EQ(g.problem, "");
  ASSERT_EQ(g.frames.size(), 2u);
  EXPECT_EQ(g.frames[0].first, CodeOf("gen"));
  EXPECT_EQ(g.frames[0].second, 8);
  EXPECT_EQ(g.frames[1].second, 20);

  const Result m = Get("in_method");
  ExpectAllAtCalls(m);
  EXPECT_EQ(m.problem, "");
  ASSERT_EQ(m.frames.size(), 2u);
  EXPECT_EQ(m.frames[0].first, CodeOf("C.method"));
  EXPECT_EQ(m.frames[0].second, 11);
  EXPECT_EQ(m.frames[1].second, 21);
}

TEST_F(PythonFramesTest, DeepRecursion) {
  const Result r = Get("deep");
  ExpectAllAtCalls(r);
  EXPECT_EQ(r.problem, "");
  EXPECT_FALSE(r.truncated);
  ASSERT_EQ(r.frames.size(), 42u);  // 41 recurse frames + <module>
  EXPECT_EQ(r.frames[0].second, 14);
  for (int i = 1; i <= 40; ++i) {
    EXPECT_EQ(r.frames[i].first, CodeOf("recurse"));
    EXPECT_EQ(r.frames[i].second, 15) << i;
  }
  EXPECT_EQ(r.frames[41].second, 22);
}

TEST_F(PythonFramesTest, RacyReadingAgreesWithDirectReading) {
  // Every capture() above read the stack both ways.
  EXPECT_EQ(g_racy_disagreements, 0);
  EXPECT_EQ(g_foreign_disagreements, 0);
}

TEST_F(PythonFramesTest, AnotherThreadReadsAWaitingThreadsStack) {
  // The main thread is in a C call (as when it waits for a worker): a thread with no Python
  // state reads the same frames.
  PyObject* res = PyRun_String("def a():\n    return b()\ndef b():\n    return from_thread()\n"
                               "from_thread_n = a()\n",
                               Py_file_input, globals_, globals_);
  ASSERT_NE(res, nullptr);
  Py_DECREF(res);
  PyObject* n = PyDict_GetItemString(globals_, "from_thread_n");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(PyLong_AsLong(n), 3);  // b, a, <module>
}

TEST_F(PythonFramesTest, AnotherThreadReadsARunningThreadSafely) {
  // A thread reads the main thread's stack over and over while the main thread pushes and
  // pops frames (and code objects come and go): no fault, and every frame it reports either
  // resolves to a live code object or is refused by ForeignCodeLooksAlive.
  PyThreadState* ts = PyThreadState_Get();
  std::atomic<bool> stop{false};
  std::atomic<long> reads{0}, frames_seen{0}, bad{0};
  std::thread reader([&] {
    RawFrame frames[kMaxFrames];
    while (!stop.load()) {
      const StackRead r = ReadOtherThreadStack(ts, frames, kMaxFrames);
      reads.fetch_add(1);
      frames_seen.fetch_add(r.nframes);
      for (int i = 0; i < r.nframes; ++i) {
        if (frames[i].reserved != kForeignFrame || frames[i].code == nullptr) bad.fetch_add(1);
      }
    }
  });
  PyObject* res = PyRun_String(
      "def churn(k):\n"
      "    if k == 0:\n"
      "        return sum(range(50))\n"
      "    return churn(k - 1)\n"
      "for i in range(3000):\n"
      "    churn(i % 30)\n"
      "    exec(compile('def f_%d():\\n    return 1\\nf_%d()' % (i, i), '<gen>', 'exec'), {})\n",
      Py_file_input, globals_, globals_);
  stop.store(true);
  reader.join();
  ASSERT_NE(res, nullptr);
  Py_DECREF(res);
  EXPECT_GT(reads.load(), 10);
  EXPECT_GT(frames_seen.load(), 0);
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(PythonFramesTest, ForeignCodeCheckRefusesWhatIsNotALiveCodeObject) {
  PyObject* code = CodeOf("inner");
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(ForeignCodeLooksAlive(RawFrame{code, 0, kForeignFrame}));
  EXPECT_TRUE(ForeignCodeLooksAlive(RawFrame{code, -1, kForeignFrame}));
  EXPECT_FALSE(ForeignCodeLooksAlive(RawFrame{code, CodeUnitCount(code), kForeignFrame}));
  EXPECT_FALSE(ForeignCodeLooksAlive(RawFrame{code, -2, kForeignFrame}));
  EXPECT_FALSE(ForeignCodeLooksAlive(RawFrame{Py_None, 0, kForeignFrame}));
  EXPECT_FALSE(ForeignCodeLooksAlive(RawFrame{reinterpret_cast<void*>(uintptr_t{0xe5}), 0, 1}));
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  munmap(page, 4096);
  EXPECT_FALSE(ForeignCodeLooksAlive(RawFrame{page, 0, kForeignFrame}));
}

// The slot the reader starts from: what a signal sees as the innermost frame.
void** CurrentFrameSlot(PyThreadState* ts) {
#if PY_VERSION_HEX >= 0x030D0000
  return reinterpret_cast<void**>(&ts->current_frame);
#elif PY_VERSION_HEX < 0x030B0000
  return reinterpret_cast<void**>(&ts->frame);
#else
  return reinterpret_cast<void**>(&ts->cframe->current_frame);
#endif
}

TEST_F(PythonFramesTest, GarbageCurrentFrameIsDroppedNotFollowed) {
  // On entry to the eval loop (3.11, 3.12) current_frame briefly holds whatever the C stack
  // held: seen in the field as a "frame" whose code pointer was 0xe5, which crashed the CPU
  // signal handler. The racy reader must survive any value there; the direct reader must at
  // least refuse implausible code pointers.
  PyThreadState* ts = PyThreadState_Get();
  void** slot = CurrentFrameSlot(ts);
  void* saved = *slot;
  // A frame-sized block of 0xe5 bytes whose "previous" points to another such block.
  alignas(16) static unsigned char junk[2][256];
  std::memset(junk, 0xe5, sizeof(junk));
  void* next = junk[1];
  std::memcpy(junk[0] + offsetof(cpython::InterpreterFrame, previous), &next, sizeof(next));
  // An address that is not mapped.
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  munmap(page, 4096);
  // A frame whose code pointer is unmapped and whose previous link is unmapped too.
  alignas(16) static unsigned char dangling[256];
  std::memset(dangling, 0, sizeof(dangling));
  auto* df = reinterpret_cast<cpython::InterpreterFrame*>(dangling);
#if PY_VERSION_HEX >= 0x030D0000
  df->f_executable = static_cast<PyObject*>(page);
#else
  df->f_code = static_cast<PyObject*>(page);
#endif
  df->previous = static_cast<cpython::InterpreterFrame*>(page);
  // The field's case: a readable "frame" whose code is readable but no code object, linking
  // to a frame whose code pointer is 0xe5 (the reader used to trust every link after the
  // first frame and read 0xe5's type in place).
  alignas(16) static unsigned char stale[2][256];
  std::memset(stale, 0, sizeof(stale));
  auto* s0 = reinterpret_cast<cpython::InterpreterFrame*>(stale[0]);
  auto* s1 = reinterpret_cast<cpython::InterpreterFrame*>(stale[1]);
#if PY_VERSION_HEX >= 0x030D0000
  s0->f_executable = reinterpret_cast<PyObject*>(stale[1]);
  s1->f_executable = reinterpret_cast<PyObject*>(uintptr_t{0xe5});
#else
  s0->f_code = reinterpret_cast<PyObject*>(stale[1]);
  s1->f_code = reinterpret_cast<PyObject*>(uintptr_t{0xe5});
#endif
  s0->previous = s1;
  for (void* garbage : {static_cast<void*>(junk[0]), page, static_cast<void*>(dangling),
                        reinterpret_cast<void*>(uintptr_t{0xe5}), static_cast<void*>(stale[0])}) {
    *slot = garbage;
    RawFrame frames[kMaxFrames];
    const StackRead r = ReadPythonStack(ts, frames, kMaxFrames, /*racy=*/true);
    const StackRead o = ReadOtherThreadStack(ts, frames, kMaxFrames);
    *slot = saved;
    EXPECT_EQ(r.nframes, 0) << garbage;
    EXPECT_GT(r.invalid, 0) << garbage;
    EXPECT_EQ(o.nframes, 0) << garbage;
    EXPECT_GT(o.invalid, 0) << garbage;
  }
  // Directly: a garbage code pointer is rejected before it is dereferenced.
  *slot = junk[0];
  RawFrame frames[kMaxFrames];
  const StackRead direct = ReadPythonStack(ts, frames, 1);  // stops after junk[0]'s link
  *slot = saved;
  EXPECT_EQ(direct.nframes, 0);
  EXPECT_GT(direct.invalid, 0);
}

TEST_F(PythonFramesTest, SelfCheckNeedsAFrame) {
  // Called from C with no Python frame on the stack, the check has nothing to compare.
  const Status check = SelfCheckFrameLayout();
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.message(), "no Python frame to check against");
  RawFrame frames[4];
  const StackRead r = ReadPythonStack(PyThreadState_Get(), frames, 4);
  EXPECT_EQ(r.nframes, 0);
  EXPECT_EQ(ReadPythonStack(nullptr, frames, 4).nframes, 0);
}

}  // namespace
}  // namespace peakline::python
