// Reading CPython's frame stack without the Python API.
//
// Why: the CPU signal handler must capture "(code object, instruction offset)" of every frame
// of the interrupted thread in about a nanosecond per frame, without the GIL and without
// allocating (PyThreadState_GetFrame may allocate a frame object). We read the private
// _PyInterpreterFrame directly, through a mirror of the fields we need, per CPython minor
// version (the layouts below are copied in shape, not code, from Include/internal/
// pycore_frame.h of 3.11, 3.12 and 3.13; 3.10's frame objects are in
// engine/frame_layout_v310.h). SelfCheck() verifies the mirror against the real
// interpreter at start-up; if it fails, stack capture is disabled rather than trusted.
//
// Every pointer read is validated (type of the code object, instruction inside the code) and
// bad frames are counted and dropped, never followed.
#ifndef PEAKLINE_ENGINE_PYTHON_FRAMES_H_
#define PEAKLINE_ENGINE_PYTHON_FRAMES_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>

#include "engine/sample_record.h"

namespace peakline::engine::cpython {
// What the frame reader needs of a code object (filled per version by ReadCodeShape).
struct CodeShape {
  PyTypeObject* type = nullptr;
  Py_ssize_t ncodeunits = 0;              // instructions, in 2-byte code units
  const uint16_t* first_instr = nullptr;  // where they start (frames point into them)
};
}  // namespace peakline::engine::cpython

#include "engine/frame_layout_v310.h"  // CPython 3.10 (empty for other versions)
#include "engine/safe_read.h"

namespace peakline::engine {

namespace cpython {

#if PY_VERSION_HEX >= 0x030E0000
#error "peakline: frame layout for this CPython version is not known yet"
#elif PY_VERSION_HEX >= 0x030D0000
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
inline constexpr char kOwnedByCStack = 3;
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return reinterpret_cast<InterpreterFrame*>(ts->current_frame);
}
#elif PY_VERSION_HEX >= 0x030C0000
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
inline constexpr char kOwnedByCStack = 3;
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return ts->cframe ? reinterpret_cast<InterpreterFrame*>(ts->cframe->current_frame) : nullptr;
}
#elif PY_VERSION_HEX >= 0x030B0000
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
inline constexpr char kOwnedByCStack = -1;  // no shim frames in 3.11
inline InterpreterFrame* CurrentFrame(PyThreadState* ts) {
  return ts->cframe ? reinterpret_cast<InterpreterFrame*>(ts->cframe->current_frame) : nullptr;
}
#elif PY_VERSION_HEX >= 0x030A0000
// 3.10: engine/frame_layout_v310.h
#else
#error "peakline supports CPython 3.10 to 3.15"
#endif

#if PY_VERSION_HEX >= 0x030B0000
// 3.11+: frames point into the code object's own instruction array (co_code_adaptive), whose
// length in code units is the object's ob_size.
inline bool FrameIsShim(const InterpreterFrame* f) { return f->owner == kOwnedByCStack; }
inline std::ptrdiff_t FrameLasti(const InterpreterFrame* f, const CodeShape& code) {
  return FrameInstr(f) - code.first_instr;
}
// With copy, the object's header is read through SafeRead: false when it cannot be read.
inline bool ReadCodeShape(const void* code, bool copy, CodeShape* out) {
  PyVarObject head;
  if (copy) {
    if (!SafeRead(code, &head, sizeof(head))) return false;
  } else {
    head = *reinterpret_cast<const PyVarObject*>(code);
  }
  out->type = head.ob_base.ob_type;
  out->ncodeunits = head.ob_size;
  out->first_instr =
      reinterpret_cast<const uint16_t*>(reinterpret_cast<const PyCodeObject*>(code)->co_code_adaptive);
  return true;
}
#endif

}  // namespace cpython

struct StackRead {
  int nframes = 0;
  int invalid = 0;
  bool truncated = false;
  int top_opcode = -1;  // opcode of the leaf frame's current instruction, -1 if unknown
};

// Reads thread state ts's frames, leaf first, into out (at most max). Async-signal-safe when
// called on the thread that owns ts; safe for another thread's ts only while the caller holds
// the GIL (the owner then cannot push or pop frames). racy: the thread may have been
// interrupted anywhere (a signal handler): the innermost frame may be being popped (its
// memory unmapped) and, on entry to the eval loop, current_frame may briefly hold stack
// garbage, so frames are copied through process_vm_readv until one proves sound, and a frame
// that fails before that ends the walk (python_frames.cc).
StackRead ReadPythonStack(PyThreadState* ts, RawFrame* out, int max, bool racy = false);

// Reads the frames of *another* thread's ts, which may be running (no GIL needed): every
// frame and every code-object header is copied through process_vm_readv, so a frame popped
// (even unmapped) under the reader fails instead of faulting, and the walk ends at the first
// frame that is not sound. Frames are marked kForeignFrame: their code object is not kept
// alive by anything the reader holds, so the aggregator checks it again before resolving it
// (ForeignCodeLooksAlive). Async-signal-safe; about two system calls per frame. ts must stay
// allocated (the main thread's state does, for the life of the interpreter).
StackRead ReadOtherThreadStack(PyThreadState* ts, RawFrame* out, int max);

// RawFrame::reserved of a frame read by ReadOtherThreadStack.
inline constexpr int32_t kForeignFrame = 1;

// For a frame read from another thread, at resolution time (GIL held): its code object still
// reads as a code object whose instructions cover the frame's offset. The capture and the
// free of that code object can race (the frame was popped and its code freed in the
// microseconds before the event was queued); a freed object fails this test unless its
// memory was reused by another code object, which then names a wrong line, never a bad
// address.
bool ForeignCodeLooksAlive(const RawFrame& frame);

// Compares ReadPythonStack with the public API on the calling thread (GIL held). Returns
// nullptr when the mirror agrees, else a static message saying what disagreed.
const char* SelfCheckFrameLayout();

}  // namespace peakline::engine

#endif  // PEAKLINE_ENGINE_PYTHON_FRAMES_H_
