// ProcessMaps: the mappings of another process, read from /proc/PID/maps, and where in that
// process a symbol of one of its loaded ELF objects lives. Used by the attach injector
// (ptrace_injector.h) to find the interpreter's and libc's functions without a debugger.
//
// Files are read through /proc/PID/root/PATH, so a target in another mount namespace (a
// container) is resolved against its own files, not the attaching process's.
#ifndef PEAKLINE_ATTACH_PROCESS_MAPS_H_
#define PEAKLINE_ATTACH_PROCESS_MAPS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "status/status.h"

namespace peakline::attach {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  std::string perms;  // "r-xp"
  std::string path;   // "" for anonymous mappings
};

class ProcessMaps {
 public:
  // Reads /proc/PID/maps; fails when it cannot be read, with the errno value as the code
  // (EACCES when it reads empty: not permitted to trace, or the process is gone).
  Status Load(pid_t pid);

  const std::vector<Mapping>& mappings() const { return mappings_; }
  // Path of the process's executable as its maps name it ("" when unknown).
  const std::string& executable() const { return executable_; }
  // Distinct mapped file paths, in address order.
  std::vector<std::string> Objects() const;

  // Address in the process of `name` defined by the mapped object `path` (its .dynsym, then
  // .symtab), or nullopt when the object does not define it.
  std::optional<uint64_t> SymbolAddress(const std::string& path, const std::string& name) const;

 private:
  pid_t pid_ = 0;
  std::vector<Mapping> mappings_;
  std::string executable_;
};

// The basename of a path ("/usr/lib/libc.so.6" -> "libc.so.6").
std::string BaseName(const std::string& path);

}  // namespace peakline::attach

#endif  // PEAKLINE_ATTACH_PROCESS_MAPS_H_
