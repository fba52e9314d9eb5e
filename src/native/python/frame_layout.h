// Which CPython frame layout the core is built for: one mirror per minor version, each in its
// own file under frame_layouts/ (the fields the frame reader needs, at their real offsets,
// and the few small functions that differ between versions). The frame reader
// (python/python_frames.cc) is written once against these; it has no version tests of its own.
// Each file defines, in peakline::python::cpython:
//   struct InterpreterFrame;          the frame, in shape; `previous` links to the caller
//   PyObject* FrameCode(f);           its code object (untagged)
//   bool OwnedByInterpreter(f);       an entry/shim frame of the interpreter's, not Python code
//   InterpreterFrame* CurrentFrame(ts);            the thread's innermost frame
//   const InterpreterFrame* CurrentFrameRacy(ts);  the same, of another, running thread
//   bool ReadCodeShape(code, copy, CodeShape*);    what the reader needs of a code object
//   const uint16_t* FrameBytecode(f, code, shape); the instructions the frame runs in
//   std::ptrdiff_t FrameLasti(f, bytecode);        its current instruction, in code units
//   bool FrameIncomplete(f, shape, lasti);         pushed, not yet at its first traceable
//                                                  instruction (left out, as CPython does)
//   bool FramePopped(ts, f);                       memory past the thread's data-stack top
// 3.11 to 3.15 share most of these (frame_layouts/frame_layout_common.h). From 3.14 on a file
// also defines PEAKLINE_CPYTHON_DEBUG_OFFSETS with `struct DebugOffsets` (the start of the
// interpreter's _Py_DebugOffsets, checked against the mirror at start) and
// FrameBytecodeCopy() (the thread-local bytecode copy of free-threaded builds).
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUT_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUT_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>

#include "python/safe_read.h"

namespace peakline::python::cpython {
// What the frame reader needs of a code object (filled per version by ReadCodeShape).
struct CodeShape {
  PyTypeObject* type = nullptr;           // nullptr: the code object could not be read
  Py_ssize_t ncodeunits = 0;              // instructions, in 2-byte code units
  const uint16_t* first_instr = nullptr;  // where they start (frames point into them)
  int first_traceable = 0;                // _co_firsttraceable (3.11+; 0 on 3.10)
};
}  // namespace peakline::python::cpython

// Free-threaded builds (thread-local bytecode, split reference counts) are mirrored from 3.14.
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX < 0x030E0000
#error "peakline: free-threaded CPython is supported from 3.14 on"
#endif

#if PY_VERSION_HEX >= 0x03100000
#error "peakline: frame layout for this CPython version is not known yet"
#elif PY_VERSION_HEX >= 0x030F0000
#include "python/frame_layouts/frame_layout_315.h"
#elif PY_VERSION_HEX >= 0x030E0000
#include "python/frame_layouts/frame_layout_314.h"
#elif PY_VERSION_HEX >= 0x030D0000
#include "python/frame_layouts/frame_layout_313.h"
#elif PY_VERSION_HEX >= 0x030C0000
#include "python/frame_layouts/frame_layout_312.h"
#elif PY_VERSION_HEX >= 0x030B0000
#include "python/frame_layouts/frame_layout_311.h"
#elif PY_VERSION_HEX >= 0x030A0000
#include "python/frame_layouts/frame_layout_310.h"
#else
#error "peakline supports CPython 3.10 to 3.15"
#endif

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUT_H_
