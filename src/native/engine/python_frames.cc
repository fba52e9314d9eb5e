#include "engine/python_frames.h"

#include <cstddef>

namespace peakline::engine {

StackRead ReadPythonStack(PyThreadState* ts, RawFrame* out, int max) {
  StackRead r;
  if (ts == nullptr) return r;
  const cpython::InterpreterFrame* f = cpython::CurrentFrame(ts);
  int guard = 0;
  while (f != nullptr) {
    if (++guard > 4096 || (reinterpret_cast<uintptr_t>(f) & (alignof(void*) - 1)) != 0) {
      ++r.invalid;
      break;
    }
    const cpython::InterpreterFrame* prev = f->previous;
    if (f->owner == cpython::kOwnedByCStack) {
      f = prev;
      continue;
    }
    PyObject* code_obj = cpython::FrameCode(f);
    if (code_obj == nullptr || Py_TYPE(code_obj) != &PyCode_Type) {
      ++r.invalid;
      f = prev;
      continue;
    }
    auto* code = reinterpret_cast<PyCodeObject*>(code_obj);
    const uint16_t* first = reinterpret_cast<const uint16_t*>(code->co_code_adaptive);
    const Py_ssize_t ncodeunits = Py_SIZE(code);
    const uint16_t* instr = cpython::FrameInstr(f);
    const std::ptrdiff_t lasti = instr - first;
    if (lasti < -1 || lasti >= ncodeunits) {
      ++r.invalid;
      f = prev;
      continue;
    }
    if (r.nframes == 0 && lasti >= 0) {
      r.top_opcode = static_cast<int>(*reinterpret_cast<const uint8_t*>(instr));
    }
    if (r.nframes >= max) {
      r.truncated = true;
      break;
    }
    out[r.nframes].code = code_obj;
    out[r.nframes].lasti = static_cast<int32_t>(lasti);
    out[r.nframes].reserved = 0;
    ++r.nframes;
    f = prev;
  }
  return r;
}

const char* SelfCheckFrameLayout() {
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
      return problem;
    }
  }
  if (r.invalid != 0) return "mirror found invalid frames";
  if (i != r.nframes) return "mirror sees more frames than the interpreter";
  if (i == 0) return "no Python frame to check against";
  return nullptr;
}

}  // namespace peakline::engine
