// ElfSymbols: symbol values and load layout of one ELF file (64-bit, little-endian), read from
// disk with a read-only mapping. Not a hot path; used before attaching to a process.
#ifndef PEAKLINE_ATTACH_ELF_SYMBOLS_H_
#define PEAKLINE_ATTACH_ELF_SYMBOLS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "status/status.h"

namespace peakline::attach {

class ElfSymbols {
 public:
  ElfSymbols() = default;
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  // Maps the file; fails when it is not a readable 64-bit ELF file.
  Status Open(const std::string& file);

  // st_value of a defined symbol `name` (.dynsym first, then .symtab), or nullopt.
  std::optional<uint64_t> Find(const std::string& name) const;
  // ET_EXEC: addresses are absolute; otherwise they are relative to the load bias.
  bool fixed_address() const { return fixed_address_; }
  // p_vaddr of the first PT_LOAD segment rounded down to its page (the bias is the address of
  // the object's first mapping minus this).
  uint64_t first_load_vaddr() const { return first_load_vaddr_; }

 private:
  std::optional<uint64_t> FindIn(int section_type, const std::string& name) const;

  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  bool fixed_address_ = false;
  uint64_t first_load_vaddr_ = 0;
};

}  // namespace peakline::attach

#endif  // PEAKLINE_ATTACH_ELF_SYMBOLS_H_
