// ReportedFiles: which files are the user's (the Python FileSelection decides; the answer is
// cached per interned file id). The aggregator needs it to stitch stacks: work done in a
// thread that has no reported frame of its own (a pandas or thread-pool worker, a BLAS
// thread) is charged to the line the main thread is on, as if that line had called it.
//
// Guarded by the GIL (it calls into Python).
#ifndef PEAKLINE_ENGINE_REPORTED_FILES_H_
#define PEAKLINE_ENGINE_REPORTED_FILES_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "profile/stack_table.h"

namespace peakline::engine {

class ReportedFiles {
 public:
  // filter: callable(filename) -> bool, or nullptr (then every file is reported).
  ReportedFiles(const profile::StackTable* table, PyObject* filter) : table_(table), filter_(filter) {
    Py_XINCREF(filter_);
  }
  ~ReportedFiles() { Py_XDECREF(filter_); }
  ReportedFiles(const ReportedFiles&) = delete;
  ReportedFiles& operator=(const ReportedFiles&) = delete;

  bool Reported(uint32_t file_id) {
    auto it = cache_.find(file_id);
    if (it != cache_.end()) return it->second;
    bool reported = true;
    if (filter_ != nullptr) {
      // No garbage collection during the call: a collection could free a code object, whose
      // deallocation hook would re-enter the drain that asked.
      const int gc_was_enabled = PyGC_Disable();
      PyObject* name = PyUnicode_FromString(table_->strings()[file_id].c_str());
      PyObject* result = name ? PyObject_CallOneArg(filter_, name) : nullptr;
      if (gc_was_enabled) PyGC_Enable();
      reported = result != nullptr && PyObject_IsTrue(result) == 1;
      if (result == nullptr) PyErr_Clear();
      Py_XDECREF(result);
      Py_XDECREF(name);
    }
    cache_.emplace(file_id, reported);
    return reported;
  }

  bool AnyReported(const std::vector<uint32_t>& frame_ids) {
    for (uint32_t id : frame_ids) {
      if (Reported(table_->frames()[id].file_id)) return true;
    }
    return false;
  }

 private:
  const profile::StackTable* table_;
  PyObject* filter_;  // strong reference
  std::unordered_map<uint32_t, bool> cache_;
};

}  // namespace peakline::engine

#endif  // PEAKLINE_ENGINE_REPORTED_FILES_H_
