// CPython 3.13's _PyInterpreterFrame, in shape (Include/internal/pycore_frame.h of 3.13):
// only the fields the frame reader needs, at their real offsets. Included by
// python/frame_layout.h, never directly.
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_313_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_313_H_

namespace peakline::python::cpython {

struct InterpreterFrame {
  PyObject* f_executable;
  InterpreterFrame* previous;
  PyObject* f_funcobj;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyObject* frame_obj;
  uint16_t* instr_ptr;  // the instruction being executed
  int stacktop;
  uint16_t return_offset;
  char owner;
};
inline PyObject* FrameCode(const InterpreterFrame* f) { return f->f_executable; }
inline const uint16_t* FrameInstr(const InterpreterFrame* f) { return f->instr_ptr; }
// FRAME_OWNED_BY_CSTACK (3): the entry shim frame of _PyEval_EvalFrameDefault.
inline bool OwnedByInterpreter(const InterpreterFrame* f) { return f->owner == 3; }
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return reinterpret_cast<InterpreterFrame*>(ts->current_frame);
}

// Another, running thread's current frame: one aligned word, read racily.
inline const InterpreterFrame* CurrentFrameRacy(PyThreadState* ts) {
  return reinterpret_cast<const InterpreterFrame*>(
      __atomic_load_n(&ts->current_frame, __ATOMIC_RELAXED));
}

}  // namespace peakline::python::cpython

#include "python/frame_layouts/frame_layout_common.h"

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_313_H_
