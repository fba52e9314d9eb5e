// ReportedFiles: which files are the user's (the Python FileSelection decides; the answer is
// cached per interned file id). The sampling session needs it to stitch stacks: work done in a
// thread that has no reported frame of its own (a pandas or thread-pool worker, a BLAS
// thread) is charged to the line the main thread is on, as if that line had called it.
//
// Guarded by the GIL (it calls into Python).
#ifndef PEAKLINE_AGGREGATE_REPORTED_FILES_H_
#define PEAKLINE_AGGREGATE_REPORTED_FILES_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregate/stack_table.h"
#include "hooks/allocation_hooks.h"

namespace peakline::aggregate {

class ReportedFiles {
 public:
  // filter: callable(filename) -> bool, or nullptr (then every file is reported).
  ReportedFiles(const StackTable* table, PyObject* filter) : table_(table), filter_(filter) {
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
      // The call may hand the GIL to other threads, and a collection inside it may free code
      // objects: the sampling session copes (see session/sampling_session.h); callers hold no
      // reference into the tables across this call. (Inside a deallocation, the code-dealloc
      // hook has already set any pending exception aside.)
      const std::string& file = table_->strings()[file_id];
      hooks::OwnWorkScope own;  // peakline's work, on whichever thread asks
      PyObject* name = PyUnicode_FromStringAndSize(file.data(), static_cast<Py_ssize_t>(file.size()));
      PyObject* result = name ? PyObject_CallOneArg(filter_, name) : nullptr;
      reported = result != nullptr && PyObject_IsTrue(result) == 1;
      if (PyErr_Occurred()) PyErr_Clear();
      Py_XDECREF(result);
      Py_XDECREF(name);
    }
    cache_.emplace(file_id, reported);
    return reported;
  }

  bool AnyReported(const std::vector<uint32_t>& frame_ids) {
    for (uint32_t id : frame_ids) {
      const uint32_t file_id = table_->frames()[id].file_id;
      if (Reported(file_id)) return true;
    }
    return false;
  }

 private:
  const StackTable* table_;
  PyObject* filter_;  // strong reference
  std::unordered_map<uint32_t, bool> cache_;
};

}  // namespace peakline::aggregate

#endif  // PEAKLINE_AGGREGATE_REPORTED_FILES_H_
