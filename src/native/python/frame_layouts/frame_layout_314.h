// CPython 3.14's _PyInterpreterFrame, in shape (Include/internal/pycore_interpframe_structs.h
// of 3.14), and the start of _Py_DebugOffsets (Include/internal/pycore_debug_offsets.h), the
// table of offsets CPython publishes for debuggers, against which the mirror is checked at
// start (SelfCheckFrameLayout). Included by python/frame_layout.h, never directly.
//
// Changed since 3.13: f_executable (and f_funcobj) are _PyStackRef, a tagged word: the
// object's address with the low bit set for a deferred (borrowed or immortal) reference; the
// frame has a stack pointer instead of stacktop; the interpreter's own frames are owned by
// FRAME_OWNED_BY_INTERPRETER (3) or FRAME_OWNED_BY_CSTACK (4); free-threaded builds keep a
// copy of the bytecode per thread (tlbc_index names it).
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_314_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_314_H_

namespace peakline::python::cpython {

struct InterpreterFrame {
  uintptr_t f_executable;  // _PyStackRef: code object (or None), tagged
  InterpreterFrame* previous;
  uintptr_t f_funcobj;     // _PyStackRef
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyObject* frame_obj;
  uint16_t* instr_ptr;     // the instruction being executed (or about to begin)
  void* stackpointer;
#ifdef Py_GIL_DISABLED
  int32_t tlbc_index;      // which thread-local copy of the bytecode instr_ptr is in
#endif
  uint16_t return_offset;
  char owner;
  uint8_t visited;
};
// PyStackRef_AsPyObjectBorrow: clear the reference-count tag (Py_TAG_REFCNT, bit 0). A tagged
// integer (bits 0 and 1 set) keeps bit 1 and fails the reader's alignment check.
inline PyObject* FrameCode(const InterpreterFrame* f) {
  return reinterpret_cast<PyObject*>(f->f_executable & ~uintptr_t{1});
}
inline const uint16_t* FrameInstr(const InterpreterFrame* f) { return f->instr_ptr; }
inline int32_t FrameBytecodeCopy(const InterpreterFrame* f) {
#ifdef Py_GIL_DISABLED
  return f->tlbc_index;
#else
  (void)f;
  return 0;
#endif
}
// FRAME_OWNED_BY_INTERPRETER (3), FRAME_OWNED_BY_CSTACK (4): entry and shim frames.
inline bool OwnedByInterpreter(const InterpreterFrame* f) { return f->owner >= 3; }
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return reinterpret_cast<InterpreterFrame*>(ts->current_frame);
}

// Another, running thread's current frame: one aligned word, read racily.
inline const InterpreterFrame* CurrentFrameRacy(PyThreadState* ts) {
  return reinterpret_cast<const InterpreterFrame*>(
      __atomic_load_n(&ts->current_frame, __ATOMIC_RELAXED));
}

// The first sections of _Py_DebugOffsets (3.14), at the start of _PyRuntime.
#define PEAKLINE_CPYTHON_DEBUG_OFFSETS 1
struct DebugOffsets {
  char cookie[8];  // "xdebugpy"
  uint64_t version;  // PY_VERSION_HEX of the running interpreter
  uint64_t free_threaded;
  struct {
    uint64_t size, finalizing, interpreters_head;
  } runtime_state;
  struct {
    uint64_t fields[16];  // size ... tlbc_generation: not used
  } interpreter_state;
  struct {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
        datastack_chunk, status;
  } thread_state;
  struct {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
  } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive, co_tlbc;
  } code_object;
};

}  // namespace peakline::python::cpython

#include "python/frame_layouts/frame_layout_common.h"

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_314_H_
