// What CPython 3.11 to 3.15 share, for the frame reader: frames (_PyInterpreterFrame) live in
// the thread's data stack and point into the code object's own instruction array
// (co_code_adaptive, ob_size code units long); a frame pushed but not yet at
// _co_firsttraceable is incomplete. Included at the end of each of those versions' layout
// files, after InterpreterFrame, FrameInstr and (3.14+) FrameBytecodeCopy; never directly.
#ifndef PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_COMMON_H_
#define PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_COMMON_H_

namespace peakline::python::cpython {

// FRAME_OWNED_BY_GENERATOR, the same in 3.11 to 3.15.
inline constexpr char kOwnedByGenerator = 1;

// The code object's type, size and first traceable instruction. With copy, its fields up to
// _co_firsttraceable are read in one SafeRead: false when they cannot be read.
inline bool ReadCodeShape(const void* code, bool copy, CodeShape* out) {
  const auto* c = reinterpret_cast<const PyCodeObject*>(code);
  alignas(PyCodeObject) unsigned char head[offsetof(PyCodeObject, _co_firsttraceable) + sizeof(int)];
  if (copy) {
    if (!SafeRead(code, head, sizeof(head))) return false;
    c = reinterpret_cast<const PyCodeObject*>(head);
  }
  out->type = c->ob_base.ob_base.ob_type;
  out->ncodeunits = c->ob_base.ob_size;
  // Not a code object: the caller drops it; its memory past the header is not read.
  out->first_traceable = out->type == &PyCode_Type ? c->_co_firsttraceable : 0;
  out->first_instr = reinterpret_cast<const uint16_t*>(
      reinterpret_cast<const PyCodeObject*>(code)->co_code_adaptive);
  return true;
}

#ifdef Py_GIL_DISABLED
// (3.14+.) A free-threaded build gives a thread that specialises a function its own copy of
// the bytecode (entry 0 of co_tlbc is the code object's own co_code_adaptive); instr_ptr then
// points into that copy. The array can grow under the reader: read through copies. nullptr
// when it cannot be read or has no such entry.
inline const uint16_t* ThreadBytecode(const PyCodeObject* code, int32_t copy) {
  _PyCodeArray* copies = nullptr;
  Py_ssize_t size = 0;
  char* entry = nullptr;
  if (!SafeRead(&code->co_tlbc, &copies, sizeof(copies)) || !PlausibleObject(copies) ||
      !SafeRead(&copies->size, &size, sizeof(size)) || copy < 0 || copy >= size ||
      !SafeRead(&copies->entries[copy], &entry, sizeof(entry))) {
    return nullptr;
  }
  return reinterpret_cast<const uint16_t*>(entry);
}
#endif

// The instructions frame f runs in (nullptr when they cannot be told): the code object's own,
// or on a free-threaded build the thread's copy.
inline const uint16_t* FrameBytecode(const InterpreterFrame* f, const PyObject* code,
                                     const CodeShape& shape) {
#ifdef Py_GIL_DISABLED
  if (const int32_t copy = FrameBytecodeCopy(f); copy != 0) {
    return ThreadBytecode(reinterpret_cast<const PyCodeObject*>(code), copy);
  }
#else
  (void)f, (void)code;
#endif
  return shape.first_instr;
}

// The frame's current instruction, in code units from the start of its instructions.
inline std::ptrdiff_t FrameLasti(const InterpreterFrame* f, const uint16_t* bytecode) {
  return FrameInstr(f) - bytecode;
}

// _PyFrame_IsIncomplete: a non-generator frame before its first traceable instruction.
inline bool FrameIncomplete(const InterpreterFrame* f, const CodeShape& shape,
                            std::ptrdiff_t lasti) {
  return f->owner != kOwnedByGenerator && lasti < shape.first_traceable;
}

// A frame inside the thread's current data-stack chunk but past its top has been popped
// (its memory is free for the next call); frames elsewhere (older chunks, generators) are not
// judged here. Reads only the thread state.
inline bool FramePopped(PyThreadState* ts, const InterpreterFrame* f) {
  const _PyStackChunk* chunk = ts->datastack_chunk;
  if (chunk == nullptr) return false;
  const auto* at = reinterpret_cast<const char*>(f);
  const auto* base = reinterpret_cast<const char*>(&chunk->data[0]);
  const auto* limit = reinterpret_cast<const char*>(ts->datastack_limit);
  const auto* top = reinterpret_cast<const char*>(ts->datastack_top);
  // top itself is allowed: the frame being popped right now (its caller is live).
  return at >= base && at < limit && at > top;
}

}  // namespace peakline::python::cpython

#endif  // PEAKLINE_PYTHON_FRAME_LAYOUTS_FRAME_LAYOUT_COMMON_H_
