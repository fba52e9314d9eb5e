// CPython 3.10's frame stack, for the frame reader (python/python_frames.cc). Included by
// python/frame_layout.h, never directly.
//
// 3.10 has no _PyInterpreterFrame: every Python frame is a heap PyFrameObject, the thread
// state points to the innermost one (PyThreadState::frame) and each links to its caller
// (f_back). The current instruction is f_lasti, an index in code units (2 bytes) into the
// code object's co_code bytes, which the eval loop stores before dispatching each
// instruction (3.10's DISPATCH(); the prediction shortcuts that skip it are compiled out when
// computed gotos are on, as in every GCC build). The code object has no inline instruction
// array and no ob_size: its instructions are the bytes object co_code.
//
// The mirror below has the fields the reader touches, laid out as the public struct _frame of
// Include/cpython/frameobject.h (3.10 still exports it); the static_asserts hold it to that
// header at compile time and SelfCheckFrameLayout() to the running interpreter at start-up.
// Only the prefix up to f_lasti is mirrored, so a copy (SafeRead) stays small.
//
// What 3.10 does not have, and the reader does without: frames owned by the interpreter
// (every frame here is a Python frame; no `owner` field), a per-thread data stack (a popped
// frame is a released object, not memory above a stack top; the thread state stops pointing
// to a frame before the frame is released, in _PyEval_EvalFrameDefault's exit), incomplete
// frames (no _co_firsttraceable: a frame is on the thread's chain only from its first
// instruction's dispatch, f_lasti -1 until then).
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_310_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_310_H_

#include <frameobject.h>

namespace peakline::python::cpython {

struct InterpreterFrame {
  PyVarObject ob_base;
  InterpreterFrame* previous;  // f_back
  PyObject* f_code;
  PyObject* f_builtins;
  PyObject* f_globals;
  PyObject* f_locals;
  PyObject** f_valuestack;
  PyObject* f_trace;
  int f_stackdepth;
  char f_trace_lines;
  char f_trace_opcodes;
  PyObject* f_gen;
  int f_lasti;  // the instruction being executed, in code units; -1 before the first
};
static_assert(offsetof(InterpreterFrame, previous) == offsetof(PyFrameObject, f_back));
static_assert(offsetof(InterpreterFrame, f_code) == offsetof(PyFrameObject, f_code));
static_assert(offsetof(InterpreterFrame, f_lasti) == offsetof(PyFrameObject, f_lasti));

inline PyObject* FrameCode(const InterpreterFrame* f) { return f->f_code; }
inline bool OwnedByInterpreter(const InterpreterFrame*) { return false; }
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return reinterpret_cast<InterpreterFrame*>(ts->frame);
}
// Another thread's current frame: one aligned word, read racily.
inline const InterpreterFrame* CurrentFrameRacy(PyThreadState* ts) {
  return reinterpret_cast<const InterpreterFrame*>(__atomic_load_n(&ts->frame, __ATOMIC_RELAXED));
}

// The code object's type and instructions (co_code). With copy, every read goes through
// SafeRead: false when the object or its co_code cannot be read or co_code is not bytes.
inline bool ReadCodeShape(const void* code, bool copy, CodeShape* out) {
  PyCodeObject c;
  const PyCodeObject* cp = reinterpret_cast<const PyCodeObject*>(code);
  if (copy) {
    if (!SafeRead(code, &c, sizeof(c))) return false;
    cp = &c;
  }
  out->type = cp->ob_base.ob_type;
  if (out->type != &PyCode_Type) return true;  // not a code object: the caller drops it
  PyObject* bytes = cp->co_code;
  PyVarObject head;
  if (copy) {
    if (!SafeRead(bytes, &head, sizeof(head))) return false;
  } else {
    head = *reinterpret_cast<const PyVarObject*>(bytes);
  }
  if (head.ob_base.ob_type != &PyBytes_Type) return false;
  out->ncodeunits = head.ob_size / 2;
  out->first_instr =
      reinterpret_cast<const uint16_t*>(reinterpret_cast<const PyBytesObject*>(bytes)->ob_sval);
  return true;
}

// The instructions are co_code's bytes; f_lasti counts code units into them.
inline const uint16_t* FrameBytecode(const InterpreterFrame*, const PyObject*,
                                     const CodeShape& shape) {
  return shape.first_instr;
}
inline std::ptrdiff_t FrameLasti(const InterpreterFrame* f, const uint16_t*) { return f->f_lasti; }
inline bool FrameIncomplete(const InterpreterFrame*, const CodeShape&, std::ptrdiff_t) {
  return false;
}
inline bool FramePopped(PyThreadState*, const InterpreterFrame*) { return false; }

}  // namespace peakline::python::cpython

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_310_H_
