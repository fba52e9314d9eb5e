// Which CPython frame layout the core is built for: one mirror per minor version, each in its
// own file under frame_layouts/ (the fields the frame reader needs, at their real offsets).
// Each defines, in peakline::engine::cpython:
//   struct InterpreterFrame;                 the frame, in shape
//   PyObject* FrameCode(const InterpreterFrame*);          its code object (untagged)
//   const uint16_t* FrameInstr(const InterpreterFrame*);   its current instruction
//   bool OwnedByInterpreter(const InterpreterFrame*);      an entry/shim frame, not Python code
//   InterpreterFrame* CurrentFrame(PyThreadState*);        the thread's innermost frame
// and, from 3.14 on, PEAKLINE_CPYTHON_DEBUG_OFFSETS with `struct DebugOffsets` (the start of
// the interpreter's _Py_DebugOffsets, checked against the mirror at start) and
// FrameBytecodeCopy() (the thread-local bytecode copy of free-threaded builds).
#ifndef PEAKLINE_ENGINE_FRAME_LAYOUT_H_
#define PEAKLINE_ENGINE_FRAME_LAYOUT_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#if PY_VERSION_HEX >= 0x03100000
#error "peakline: frame layout for this CPython version is not known yet"
#elif PY_VERSION_HEX >= 0x030F0000
#include "engine/frame_layouts/frame_layout_315.h"
#elif PY_VERSION_HEX >= 0x030E0000
#include "engine/frame_layouts/frame_layout_314.h"
#elif PY_VERSION_HEX >= 0x030D0000
#include "engine/frame_layouts/frame_layout_313.h"
#elif PY_VERSION_HEX >= 0x030C0000
#include "engine/frame_layouts/frame_layout_312.h"
#elif PY_VERSION_HEX >= 0x030B0000
#include "engine/frame_layouts/frame_layout_311.h"
#else
#error "peakline needs CPython 3.11 or newer"
#endif

#endif  // PEAKLINE_ENGINE_FRAME_LAYOUT_H_
