#include "attach/process_maps.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "attach/elf_symbols.h"

namespace peakline::attach {

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status ProcessMaps::Load(pid_t pid) {
  pid_ = pid;
  mappings_.clear();
  const std::string where = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream in(where);
  if (!in) {
    const int err = errno;
    return Status::FromErrno(err, "cannot read " + where);
  }
  std::string line;
  errno = 0;
  while (std::getline(in, line)) {
    Mapping m;
    unsigned long long start = 0, end = 0, offset = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset,
                    &path_at) < 4) {
      continue;
    }
    m.start = start;
    m.end = end;
    m.offset = offset;
    m.perms = perms;
    if (path_at > 0 && static_cast<size_t>(path_at) < line.size()) m.path = line.substr(path_at);
    if (!m.path.empty() && m.path[0] != '/') m.path.clear();  // [heap], [stack], [vdso] ...
    mappings_.push_back(std::move(m));
  }
  if (mappings_.empty()) {
    // A readable file with unreadable content: ptrace access denied.
    const int err = errno != 0 ? errno : EACCES;
    return Status::Error(
        "cannot read " + where + " (no mappings: not permitted, or the process is gone)", err);
  }
  char exe[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = readlink(link.c_str(), exe, sizeof(exe) - 1);
  executable_ = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
  return Status();
}

std::vector<std::string> ProcessMaps::Objects() const {
  std::vector<std::string> out;
  for (const Mapping& m : mappings_) {
    if (m.path.empty()) continue;
    bool seen = false;
    for (const std::string& p : out) seen = seen || p == m.path;
    if (!seen) out.push_back(m.path);
  }
  return out;
}

std::optional<uint64_t> ProcessMaps::SymbolAddress(const std::string& path,
                                                   const std::string& name) const {
  uint64_t lowest = 0;
  bool found = false;
  for (const Mapping& m : mappings_) {
    if (m.path == path && m.offset == 0 && (!found || m.start < lowest)) {
      lowest = m.start;
      found = true;
    }
  }
  if (!found) return std::nullopt;
  // The target's own view of the file (its mount namespace), then the path as it reads.
  ElfSymbols elf;
  if (!elf.Open("/proc/" + std::to_string(pid_) + "/root" + path).ok() && !elf.Open(path).ok()) {
    return std::nullopt;
  }
  const std::optional<uint64_t> value = elf.Find(name);
  if (!value) return std::nullopt;
  return elf.fixed_address() ? *value : lowest - elf.first_load_vaddr() + *value;
}

}  // namespace peakline::attach
