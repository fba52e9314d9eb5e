#include "engine/python_frames.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace peakline::engine {

namespace {

// Copies n bytes at addr into out through the kernel: an unmapped address fails with EFAULT
// instead of a SIGSEGV. Async-signal-safe (one system call, ~0.3 us).
bool SafeRead(const void* addr, void* out, size_t n) {
  iovec local{out, n};
  iovec remote{const_cast<void*>(addr), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

// The innermost frame can be mid-teardown when a signal interrupts the thread: CPython pops
// a frame (and may munmap its data-stack chunk, and drop the last reference to its code
// object) *before* it moves current_frame to the caller. Everything read from that frame is
// therefore copied with SafeRead; frames below it are live and read directly.
struct TopFrameCopy {
  cpython::InterpreterFrame frame;
  PyObject code_head;            // ob_refcnt, ob_type
  Py_ssize_t ncodeunits;
};

bool CopyTopFrame(const cpython::InterpreterFrame* f, TopFrameCopy* copy) {
  if (!SafeRead(f, &copy->frame, sizeof(copy->frame))) return false;
  PyObject* code = cpython::FrameCode(&copy->frame);
  if (code == nullptr) return false;
  PyVarObject head;
  if (!SafeRead(code, &head, sizeof(head))) return false;
  copy->code_head = head.ob_base;
  copy->ncodeunits = head.ob_size;
  return true;
}

}  // namespace

StackRead ReadPythonStack(PyThreadState* ts, RawFrame* out, int max, bool racy_top) {
  StackRead r;
  if (ts == nullptr) return r;
  const cpython::InterpreterFrame* f = cpython::CurrentFrame(ts);
  if (racy_top && f != nullptr) {
    TopFrameCopy top;
    if (!CopyTopFrame(f, &top)) {
      ++r.invalid;
      return r;
    }
    PyObject* code_obj = cpython::FrameCode(&top.frame);
    const cpython::InterpreterFrame* prev = top.frame.previous;
    if (top.frame.owner != cpython::kOwnedByCStack) {
      if (top.code_head.ob_type != &PyCode_Type) {
        ++r.invalid;
      } else {
        auto* code = reinterpret_cast<PyCodeObject*>(code_obj);
        const uint16_t* first = reinterpret_cast<const uint16_t*>(code->co_code_adaptive);
        const uint16_t* instr = cpython::FrameInstr(&top.frame);
        const std::ptrdiff_t lasti = instr - first;
        if (lasti < -1 || lasti >= top.ncodeunits) {
          ++r.invalid;
        } else {
          uint8_t opcode = 0;
          if (lasti >= 0 && SafeRead(instr, &opcode, 1)) r.top_opcode = opcode;
          if (max > 0) {
            out[0] = RawFrame{code_obj, static_cast<int32_t>(lasti), 0};
            r.nframes = 1;
          }
        }
      }
    }
    f = prev;
  }
  // Deep stacks keep their leaf part and their root part: the root holds the user's line that
  // started it all (an import chain, a framework's dispatch), the leaf what is running now.
  // Frames past the leaf budget go through a small ring that ends up holding the outermost.
  const int root_budget = max >= 16 ? max / 4 : 0;
  const int leaf_budget = max - root_budget;
  RawFrame root[kMaxFrames / 4 > 0 ? kMaxFrames / 4 : 1];
  int root_seen = 0;
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
    if (r.nframes == 0 && lasti >= 0 && !racy_top) {
      r.top_opcode = static_cast<int>(*reinterpret_cast<const uint8_t*>(instr));
    }
    const RawFrame frame{code_obj, static_cast<int32_t>(lasti), 0};
    if (r.nframes < leaf_budget) {
      out[r.nframes++] = frame;
    } else if (root_budget > 0 && root_budget <= static_cast<int>(sizeof(root) / sizeof(root[0]))) {
      root[root_seen % root_budget] = frame;
      ++root_seen;
    } else {
      r.truncated = true;
      break;
    }
    f = prev;
  }
  if (root_seen > 0) {
    // Oldest entry of the ring first, so out[] stays leaf-first and ends with the root.
    const int kept = root_seen < root_budget ? root_seen : root_budget;
    const int start = root_seen < root_budget ? 0 : root_seen % root_budget;
    for (int i = 0; i < kept; ++i) out[r.nframes++] = root[(start + i) % root_budget];
    if (root_seen > root_budget) r.truncated = true;
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
