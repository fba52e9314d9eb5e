#include "attach/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace peakline::attach {

ElfSymbols::~ElfSymbols() {
  if (data_ != nullptr) munmap(const_cast<unsigned char*>(data_), size_);
}

Status ElfSymbols::Open(const std::string& file) {
  if (data_ != nullptr) munmap(const_cast<unsigned char*>(data_), size_);
  data_ = nullptr;
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Status::FromErrno(err, "cannot open " + file);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return Status::Error(file + " is not an ELF file");
  }
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    const int err = errno;
    return Status::FromErrno(err, "cannot map " + file);
  }
  data_ = static_cast<const unsigned char*>(map);
  size_ = static_cast<size_t>(st.st_size);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_ident[EI_DATA] != ELFDATA2LSB) {
    return Status::Error(file + " is not a 64-bit little-endian ELF file");
  }
  fixed_address_ = eh->e_type == ET_EXEC;
  if (eh->e_phoff + static_cast<uint64_t>(eh->e_phnum) * sizeof(Elf64_Phdr) > size_) {
    return Status::Error(file + ": program headers out of range");
  }
  const auto* ph = reinterpret_cast<const Elf64_Phdr*>(data_ + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD) {
      first_load_vaddr_ = ph[i].p_vaddr & ~static_cast<uint64_t>(0xfff);
      break;
    }
  }
  return Status();
}

std::optional<uint64_t> ElfSymbols::Find(const std::string& name) const {
  if (auto v = FindIn(SHT_DYNSYM, name)) return v;
  return FindIn(SHT_SYMTAB, name);
}

std::optional<uint64_t> ElfSymbols::FindIn(int section_type, const std::string& name) const {
  if (data_ == nullptr) return std::nullopt;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  if (eh->e_shoff == 0 || eh->e_shoff + static_cast<uint64_t>(eh->e_shnum) * sizeof(Elf64_Shdr) > size_) {
    return std::nullopt;
  }
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(data_ + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (static_cast<int>(sh[i].sh_type) != section_type || sh[i].sh_entsize != sizeof(Elf64_Sym)) continue;
    if (sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strtab = sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > size_ || strtab.sh_offset + strtab.sh_size > size_) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(data_ + sh[i].sh_offset);
    const char* strings = reinterpret_cast<const char*>(data_ + strtab.sh_offset);
    const size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < count; ++k) {
      const Elf64_Sym& s = syms[k];
      if (s.st_shndx == SHN_UNDEF || s.st_value == 0 || s.st_name >= strtab.sh_size) continue;
      const unsigned type = ELF64_ST_TYPE(s.st_info);
      if (type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC) continue;
      if (std::strncmp(strings + s.st_name, name.c_str(), strtab.sh_size - s.st_name) == 0) {
        return s.st_value;
      }
    }
  }
  return std::nullopt;
}

}  // namespace peakline::attach
