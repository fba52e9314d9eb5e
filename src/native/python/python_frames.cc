#include "python/python_frames.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>

namespace peakline::python {

using transport::RawFrame;
using transport::kMaxFrames;

namespace {

// A signal can interrupt the thread anywhere, and the innermost frame is not always sound:
// * CPython pops a frame (and may munmap its data-stack chunk, and drop the last reference to
//   its code object) *before* it moves current_frame to the caller;
// * on entry to _PyEval_EvalFrameDefault (3.11, 3.12) the thread state points to the new C
//   frame record a few instructions *before* that record's current_frame is written: for
//   that moment current_frame is whatever the C stack held there, often a stale pointer to a
//   popped frame, or a small integer (seen: a crash reading a "code object" at 0xe5, once in
//   a few hundred runs under load).
// So in racy mode the walk starts with copies (SafeRead) and trusts the chain only from the
// first frame that proves sound: readable, a real code object, its instruction inside that
// code, and not a popped frame (one above the data stack's top in the current chunk). A
// frame that fails before that ends the walk: its previous link is not followed. Once a sound
// frame is found, the frames it links to are live (their calls are still running) and are
// read in place, as every frame is without racy (the thread's own allocation hooks, which
// never run in those windows; another thread's stack while the GIL holds it still). Reading
// every frame through SafeRead instead cost 2-5% of run time on deep stacks (docutils).
struct FrameView {
  cpython::InterpreterFrame copy;  // racy: the frame's bytes; else unused
  const cpython::InterpreterFrame* frame = nullptr;
  cpython::CodeShape code;  // code.type == nullptr: the code object could not be read
};

// Fills view for frame f (copied when copy is set); false when f cannot be read at all.
bool ViewFrame(const cpython::InterpreterFrame* f, bool copy, FrameView* view) {
  if (copy) {
    if (!SafeRead(f, &view->copy, sizeof(view->copy))) return false;
    view->frame = &view->copy;
  } else {
    view->frame = f;
  }
  view->code = cpython::CodeShape{};
  PyObject* code = cpython::FrameCode(view->frame);
  if (cpython::OwnedByInterpreter(view->frame) || !PlausibleObject(code)) return true;
  if (!cpython::ReadCodeShape(code, copy, &view->code)) view->code = cpython::CodeShape{};
  return true;
}
}  // namespace

namespace {
enum class ReadMode { kOwn, kOwnRacy, kOtherThread };

// The thread's current frame; another, running thread's is read racily (CurrentFrameRacy: on
// 3.11 and 3.12 it sits in a C-stack record that the owner replaces on every entry to the eval
// loop, so it is copied, not dereferenced).
const cpython::InterpreterFrame* CurrentFrameOf(PyThreadState* ts, ReadMode mode) {
  if (mode != ReadMode::kOtherThread) return cpython::CurrentFrame(ts);
  return cpython::CurrentFrameRacy(ts);
}

StackRead ReadStack(PyThreadState* ts, RawFrame* out, int max, ReadMode mode);
}  // namespace

StackRead ReadPythonStack(PyThreadState* ts, RawFrame* out, int max, bool racy) {
  return ReadStack(ts, out, max, racy ? ReadMode::kOwnRacy : ReadMode::kOwn);
}

StackRead ReadOtherThreadStack(PyThreadState* ts, RawFrame* out, int max) {
  StackRead r = ReadStack(ts, out, max, ReadMode::kOtherThread);
  for (int i = 0; i < r.nframes; ++i) out[i].reserved = kForeignFrame;
  return r;
}

namespace {
// A reference count that a live object can have: a freed block's first word is an allocator's
// free-list pointer (or 0), far above any count.
bool PlausibleRefcount(Py_ssize_t refcnt) { return refcnt > 0 && refcnt < (Py_ssize_t{1} << 40); }

// The reference count in a copied object header. A free-threaded build splits it into a
// thread-local and a shared part with no single word to judge: the type check decides alone.
bool PlausibleHeaderRefcount(const PyObject& head) {
#ifdef Py_GIL_DISABLED
  (void)head;
  return true;
#else
  return PlausibleRefcount(head.ob_refcnt);
#endif
}

bool LooksLikeLiveString(const PyObject* s) {
  PyObject head;
  return PlausibleObject(s) && SafeRead(s, &head, sizeof(head)) &&
         head.ob_type == &PyUnicode_Type && PlausibleHeaderRefcount(head);
}
}  // namespace

bool ForeignCodeLooksAlive(const RawFrame& frame) {
  // A racy reading of another thread's stack can name a code object freed since (a stale
  // frame of the data stack, a reading taken just before the free): everything the resolver
  // will touch first is checked through copies. Freed memory that still passes is resolved
  // to whatever it held, never dereferenced past these fields unchecked.
  PyCodeObject code;
  cpython::CodeShape shape;
  if (!PlausibleObject(frame.code) || !SafeRead(frame.code, &code, sizeof(code)) ||
      !cpython::ReadCodeShape(frame.code, /*copy=*/true, &shape)) {
    return false;
  }
  return shape.type == &PyCode_Type &&
         PlausibleHeaderRefcount(*reinterpret_cast<const PyObject*>(&code)) && frame.lasti >= -1 &&
         frame.lasti < shape.ncodeunits && LooksLikeLiveString(code.co_filename) &&
         LooksLikeLiveString(code.co_name);
}

namespace {
StackRead ReadStack(PyThreadState* ts, RawFrame* out, int max, ReadMode mode) {
  const bool racy = mode != ReadMode::kOwn;
  const bool always_copy = mode == ReadMode::kOtherThread;
  StackRead r;
  if (ts == nullptr) return r;
  const cpython::InterpreterFrame* f = CurrentFrameOf(ts, mode);
  // Deep stacks keep their leaf part and their root part: the root holds the user's line that
  // started it all (an import chain, a framework's dispatch), the leaf what is running now.
  // Frames past the leaf budget go through a small ring that ends up holding the outermost.
  const int root_budget = max >= 16 ? max / 4 : 0;
  const int leaf_budget = max - root_budget;
  RawFrame root[kMaxFrames / 4 > 0 ? kMaxFrames / 4 : 1];
  int root_seen = 0;
  int guard = 0;
  bool unproven = racy;  // racy: nothing sound seen yet, so copy and do not follow failures
  bool at_top = true;
  FrameView view;
  while (f != nullptr) {
    if (++guard > 4096 || (reinterpret_cast<uintptr_t>(f) & (alignof(void*) - 1)) != 0 ||
        !ViewFrame(f, unproven, &view) || (unproven && cpython::FramePopped(ts, f))) {
      ++r.invalid;
      break;
    }
    const cpython::InterpreterFrame* fr = view.frame;
    const cpython::InterpreterFrame* prev = fr->previous;
    if (cpython::OwnedByInterpreter(fr)) {
      f = prev;
      continue;
    }
    const bool top = at_top;
    at_top = false;
    PyObject* code_obj = cpython::FrameCode(fr);
    std::ptrdiff_t lasti = -2;
    const uint16_t* bytecode = nullptr;  // the instructions fr runs in
    if (view.code.type == &PyCode_Type) bytecode = cpython::FrameBytecode(fr, code_obj, view.code);
    if (bytecode != nullptr) lasti = cpython::FrameLasti(fr, bytecode);
    if (lasti < -1 || lasti >= view.code.ncodeunits) {
      ++r.invalid;
      if (unproven) break;  // garbage, or a frame too far gone to vouch for its caller
      f = prev;
      continue;
    }
    const bool copied = unproven;
    unproven = always_copy;  // another running thread: no frame vouches for the next one
    // A frame that has not reached its first traceable instruction (pushed, its call not yet
    // begun; 3.13+'s __init__ shim of CALL_ALLOC_AND_ENTER_INIT) is what CPython itself calls
    // incomplete and leaves out of every frame walk: its caller's line is the one running.
    if (cpython::FrameIncomplete(fr, view.code, lasti)) {
      at_top = top;
      f = prev;
      continue;
    }
    if (top && lasti >= 0) {
      const uint16_t* instr = bytecode + lasti;
      uint8_t opcode = 0;
      if (!copied) {
        r.top_opcode = *reinterpret_cast<const uint8_t*>(instr);
      } else if (SafeRead(instr, &opcode, 1)) {
        r.top_opcode = opcode;
      }
    }
    const RawFrame frame{code_obj, static_cast<int32_t>(lasti), 0};
    if (r.nframes < leaf_budget) {
      out[r.nframes++] = frame;
    } else if (root_budget > 0 && root_budget <= static_cast<int>(sizeof(root) / sizeof(root[0]))) {
      root[root_seen % root_budget] = frame;
      ++root_seen;
    } else {
      r.truncated = true;
      break;
    }
    f = prev;
  }
  if (root_seen > 0) {
    // Oldest entry of the ring first, so out[] stays leaf-first and ends with the root.
    const int kept = root_seen < root_budget ? root_seen : root_budget;
    const int start = root_seen < root_budget ? 0 : root_seen % root_budget;
    for (int i = 0; i < kept; ++i) out[r.nframes++] = root[(start + i) % root_budget];
    if (root_seen > root_budget) r.truncated = true;
  }
  return r;
}
}  // namespace

namespace {
#ifdef PEAKLINE_CPYTHON_DEBUG_OFFSETS
// From 3.14 on the interpreter publishes the offsets of the fields an out-of-process debugger
// reads (_Py_DebugOffsets, the first member of _PyRuntime, for remote debugging). The reader
// keeps its compiled mirror (a field read costs nothing in the signal handler, where an
// offset table costs a load per field) and holds it to the interpreter's own table here:
// a mirror that does not match the running interpreter is refused before it is used.
Status CheckDebugOffsets() {
  const auto* d = static_cast<const cpython::DebugOffsets*>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
  if (d == nullptr) {
    return Status::Error("the interpreter exports no _PyRuntime to check the frame layout");
  }
  if (std::memcmp(d->cookie, "xdebugpy", sizeof(d->cookie)) != 0) {
    return Status::Error("_PyRuntime does not start with the interpreter's debug offsets");
  }
  if ((d->version >> 16) != (PY_VERSION_HEX >> 16)) {
    return Status::Error("the core was built for another CPython version than the one running");
  }
#ifdef Py_GIL_DISABLED
  constexpr uint64_t kFreeThreaded = 1;
#else
  constexpr uint64_t kFreeThreaded = 0;
#endif
  if (d->free_threaded != kFreeThreaded) {
    return Status::Error(
        "the core was built for a CPython build of the other threading kind (GIL or "
        "free-threaded)");
  }
  using Frame = cpython::InterpreterFrame;
  const auto& frame = d->interpreter_frame;
  if (frame.previous != offsetof(Frame, previous) ||
      frame.executable != offsetof(Frame, f_executable) ||
      frame.instr_ptr != offsetof(Frame, instr_ptr) || frame.owner != offsetof(Frame, owner) ||
      frame.stackpointer != offsetof(Frame, stackpointer)) {
    return Status::Error("the frame mirror disagrees with the interpreter's debug offsets");
  }
#ifdef Py_GIL_DISABLED
  if (frame.tlbc_index != offsetof(Frame, tlbc_index) ||
      d->code_object.co_tlbc != offsetof(PyCodeObject, co_tlbc)) {
    return Status::Error(
        "the thread-local bytecode fields disagree with the interpreter's debug offsets");
  }
#endif
  if (d->thread_state.current_frame != offsetof(PyThreadState, current_frame) ||
      d->thread_state.datastack_chunk != offsetof(PyThreadState, datastack_chunk) ||
      d->code_object.co_code_adaptive != offsetof(PyCodeObject, co_code_adaptive)) {
    return Status::Error(
        "the thread state or code object headers disagree with the interpreter's debug "
        "offsets");
  }
  return Status();
}
#endif
}  // namespace

Status SelfCheckFrameLayout() {
#ifdef PEAKLINE_CPYTHON_DEBUG_OFFSETS
  if (Status offsets = CheckDebugOffsets(); !offsets.ok()) return offsets;
#endif
  PyThreadState* ts = PyThreadState_Get();
  RawFrame frames[kMaxFrames];
  StackRead r = ReadPythonStack(ts, frames, kMaxFrames);
  PyFrameObject* frame = PyThreadState_GetFrame(ts);  // new reference or NULL
  int i = 0;
  const char* problem = nullptr;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    if (i >= r.nframes) {
      problem = "mirror sees fewer frames than the interpreter";
    } else if (frames[i].code != reinterpret_cast<PyObject*>(code)) {
      problem = "mirror reads a different code object";
    } else if (PyCode_Addr2Line(code, frames[i].lasti * 2) != PyFrame_GetLineNumber(frame)) {
      problem = "mirror reads a different instruction";
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or NULL
    Py_DECREF(frame);
    frame = back;
    ++i;
    if (problem != nullptr) {
      Py_XDECREF(frame);
      return Status::Error(problem);
    }
  }
  if (r.invalid != 0) return Status::Error("mirror found invalid frames");
  if (i != r.nframes) return Status::Error("mirror sees more frames than the interpreter");
  if (i == 0) return Status::Error("no Python frame to check against");
  return Status();
}

}  // namespace peakline::python
