// CPython 3.11's _PyInterpreterFrame, in shape (Include/internal/pycore_frame.h of 3.11):
// only the fields the frame reader needs, at their real offsets. Included by
// python/frame_layout.h, never directly.
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_311_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_311_H_

namespace peakline::python::cpython {

struct InterpreterFrame {
  PyObject* f_func;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyObject* f_code;
  PyObject* frame_obj;
  InterpreterFrame* previous;
  uint16_t* prev_instr;
  int stacktop;
  bool is_entry;
  char owner;
};
inline PyObject* FrameCode(const InterpreterFrame* f) { return f->f_code; }
inline const uint16_t* FrameInstr(const InterpreterFrame* f) { return f->prev_instr; }
// 3.11 has no frames of the interpreter's own (shim or entry frames).
inline bool OwnedByInterpreter(const InterpreterFrame*) { return false; }
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

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_311_H_
