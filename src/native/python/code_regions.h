// CodeRegionMap: classifies an interrupted instruction address (the PC a signal handler sees)
// as "the bytecode evaluation loop", "elsewhere in libpython", "libc and friends" or "other
// native code". This is how a CPU sample is split into Python time and native time.
//
// Thread safety: built once by the controlling thread before sampling starts (Add* functions,
// not signal-safe: they call dl_iterate_phdr); Classify() is read-only, lock-free and
// async-signal-safe.
#ifndef PEAKLINE_PYTHON_CODE_REGIONS_H_
#define PEAKLINE_PYTHON_CODE_REGIONS_H_

#include <cstddef>
#include <cstdint>

namespace peakline::python {

enum class CodeRegion : uint8_t {
  kOther = 0,        // extension modules, BLAS, libcrypto, ...: always native time
  kInterpreter = 1,  // libpython outside the eval loop: builtins, object protocols, GC
  kEvalLoop = 2,     // _PyEval_EvalFrameDefault itself: always Python time
  kNeutral = 3,      // libc, libm, ld.so, vDSO: classified like the Python op that reached them
};

class CodeRegionMap {
 public:
  static constexpr int kMaxRanges = 48;

  // Adds the executable segments of the loaded object that contains addr. Returns false if
  // addr is in no loaded object. Ranges added first win when ranges overlap.
  [[nodiscard]] bool AddObjectContaining(const void* addr, CodeRegion region);
  // Adds the code of the symbol that contains addr (its st_size from the ELF symbol table).
  [[nodiscard]] bool AddSymbolContaining(const void* addr, CodeRegion region);
  // Adds the functions named in names (n of them) of the loaded object that contains addr,
  // found by name in its file's full symbol table (.symtab: static functions included, which
  // dladdr cannot see). Returns how many were found: 0 when the file is stripped or
  // unreadable. Reads the file: not for a signal handler.
  int AddFileSymbols(const void* addr, const char* const* names, int n, CodeRegion region);
  // Adds the object that defines the dynamic symbol `name` (dlsym(RTLD_DEFAULT)): for runtime
  // objects that may or may not be loaded (ld.so, libm). Returns false if no loaded object
  // defines it. An object already covered by an earlier range is not added twice.
  bool AddObjectDefining(const char* name, CodeRegion region);
  // Adds the kernel's vDSO (clock_gettime, gettimeofday). Returns false if there is none.
  bool AddVdso(CodeRegion region);
  // Returns false when the table is full (the range is not added).
  bool AddRange(uintptr_t lo, uintptr_t hi, CodeRegion region);

  CodeRegion Classify(uintptr_t pc) const {
    for (int i = 0; i < n_; ++i) {
      if (pc >= ranges_[i].lo && pc < ranges_[i].hi) return ranges_[i].region;
    }
    return CodeRegion::kOther;
  }
  int size() const { return n_; }

 private:
  struct Range {
    uintptr_t lo;
    uintptr_t hi;
    CodeRegion region;
  };
  Range ranges_[kMaxRanges] = {};
  int n_ = 0;
};

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_CODE_REGIONS_H_
