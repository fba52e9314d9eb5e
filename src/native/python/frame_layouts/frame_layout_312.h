// CPython 3.12's _PyInterpreterFrame, in shape (Include/internal/pycore_frame.h of 3.12):
// only the fields the frame reader needs, at their real offsets. Included by
// python/frame_layout.h, never directly.
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_312_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_312_H_

namespace peakline::python::cpython {

struct InterpreterFrame {
  PyObject* f_code;
  InterpreterFrame* previous;
  PyObject* f_funcobj;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyObject* frame_obj;
  uint16_t* prev_instr;  // the instruction being executed (set at each instruction start)
  int stacktop;
  uint16_t return_offset;
  char owner;
};
inline PyObject* FrameCode(const InterpreterFrame* f) { return f->f_code; }
inline const uint16_t* FrameInstr(const InterpreterFrame* f) { return f->prev_instr; }
// FRAME_OWNED_BY_CSTACK (3): the entry shim frame of _PyEval_EvalFrameDefault.
inline bool OwnedByInterpreter(const InterpreterFrame* f) { return f->owner == 3; }
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return ts->cframe ? reinterpret_cast<InterpreterFrame*>(ts->cframe->current_frame) : nullptr;
}

// Another, running thread's current frame. 3.11 and 3.12 keep it in a C-stack record (cframe)
// that the owner replaces on every entry to the eval loop: copied, not dereferenced.
// ts->cframe itself is read racily (one aligned word).
inline const InterpreterFrame* CurrentFrameRacy(PyThreadState* ts) {
  auto* cframe = __atomic_load_n(&ts->cframe, __ATOMIC_RELAXED);
  if (cframe == nullptr) return nullptr;
  decltype(cframe->current_frame) current = nullptr;
  if (!SafeRead(&cframe->current_frame, &current, sizeof(current))) return nullptr;
  return reinterpret_cast<const InterpreterFrame*>(current);
}

}  // namespace peakline::python::cpython

#include "python/frame_layouts/frame_layout_common.h"

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_312_H_
