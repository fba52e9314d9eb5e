// Reading CPython's frame stack without the Python API.
//
// Why: the CPU signal handler must capture "(code object, instruction offset)" of every frame
// of the interrupted thread in about a nanosecond per frame, without the GIL and without
// allocating (PyThreadState_GetFrame may allocate a frame object). We read the private
// _PyInterpreterFrame (3.10: the PyFrameObject) directly, through a mirror of the fields we
// need, per CPython minor version (python/frame_layout.h: the layouts are copied in shape, not
// code, from CPython's headers of each version). SelfCheckFrameLayout() verifies the mirror against the
// real interpreter at start-up (and, from 3.14 on, against the offsets the interpreter itself
// publishes in _Py_DebugOffsets); if it fails, stack capture is disabled rather than trusted.
//
// Every pointer read is validated (type of the code object, instruction inside the code) and
// bad frames are counted and dropped, never followed.
#ifndef PEAKLINE_PYTHON_PYTHON_FRAMES_H_
#define PEAKLINE_PYTHON_PYTHON_FRAMES_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "python/frame_layout.h"
#include "status/status.h"
#include "transport/sample_record.h"

namespace peakline::python {

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
StackRead ReadPythonStack(PyThreadState* ts, transport::RawFrame* out, int max, bool racy = false);

// Reads the frames of *another* thread's ts, which may be running (no GIL needed): every
// frame and every code-object header is copied through process_vm_readv, so a frame popped
// (even unmapped) under the reader fails instead of faulting, and the walk ends at the first
// frame that is not sound. Frames are marked kForeignFrame: their code object is not kept
// alive by anything the reader holds, so the session checks it again before resolving it
// (ForeignCodeLooksAlive). Async-signal-safe; about two system calls per frame. ts must stay
// allocated (the main thread's state does, for the life of the interpreter).
StackRead ReadOtherThreadStack(PyThreadState* ts, transport::RawFrame* out, int max);

// RawFrame::reserved of a frame read by ReadOtherThreadStack.
inline constexpr int32_t kForeignFrame = 1;

// For a frame read from another thread, at resolution time (GIL held): its code object still
// reads as a code object whose instructions cover the frame's offset. The capture and the
// free of that code object can race (the frame was popped and its code freed in the
// microseconds before the event was queued); a freed object fails this test unless its
// memory was reused by another code object, which then names a wrong line, never a bad
// address.
bool ForeignCodeLooksAlive(const transport::RawFrame& frame);

// Compares ReadPythonStack with the public API on the calling thread (GIL held). Fails with
// what disagreed when the mirror does not agree.
Status SelfCheckFrameLayout();

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_PYTHON_FRAMES_H_
