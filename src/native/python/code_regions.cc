#include "python/code_regions.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace peakline::python {

namespace {

struct FindObject {
  uintptr_t addr;
  CodeRegionMap* map;
  CodeRegion region;
  bool found;
};

int VisitObject(struct dl_phdr_info* info, size_t, void* data) {
  auto* find = static_cast<FindObject*>(data);
  // First pass: does this object contain addr in any of its loaded segments?
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (find->addr >= lo && find->addr < lo + ph.p_memsz) contains = true;
  }
  if (!contains) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (!find->map->AddRange(lo, lo + ph.p_memsz, find->region)) return 1;
  }
  find->found = true;
  return 1;  // stop iterating
}

}  // namespace

bool CodeRegionMap::AddObjectContaining(const void* addr, CodeRegion region) {
  FindObject find{reinterpret_cast<uintptr_t>(addr), this, region, false};
  dl_iterate_phdr(VisitObject, &find);
  return find.found;
}

bool CodeRegionMap::AddSymbolContaining(const void* addr, CodeRegion region) {
  Dl_info info;
  void* extra = nullptr;
  if (dladdr1(addr, &info, &extra, RTLD_DL_SYMENT) == 0) return false;
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  if (sym == nullptr || info.dli_saddr == nullptr || sym->st_size == 0) return false;
  const auto lo = reinterpret_cast<uintptr_t>(info.dli_saddr);
  return AddRange(lo, lo + sym->st_size, region);
}

bool CodeRegionMap::AddObjectDefining(const char* name, CodeRegion region) {
  const void* addr = dlsym(RTLD_DEFAULT, name);
  if (addr == nullptr) return false;
  if (Classify(reinterpret_cast<uintptr_t>(addr)) != CodeRegion::kOther) return true;
  return AddObjectContaining(addr, region);
}

bool CodeRegionMap::AddVdso(CodeRegion region) {
  // The vDSO's ELF header is the start of its first (text) mapping; dl_iterate_phdr lists it.
  const unsigned long base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return false;
  if (Classify(base) != CodeRegion::kOther) return true;
  return AddObjectContaining(reinterpret_cast<const void*>(base), region);
}

bool CodeRegionMap::AddRange(uintptr_t lo, uintptr_t hi, CodeRegion region) {
  if (n_ >= kMaxRanges || hi <= lo) return false;
  ranges_[n_++] = Range{lo, hi, region};
  return true;
}

}  // namespace peakline::python

namespace peakline::python {

namespace {

struct FindFile {
  uintptr_t addr;
  uintptr_t bias = 0;  // load address minus link-time address
  const char* path = nullptr;
};

int VisitFile(struct dl_phdr_info* info, size_t, void* data) {
  auto* find = static_cast<FindFile*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (find->addr >= lo && find->addr < lo + ph.p_memsz) {
      find->bias = info->dlpi_addr;
      // The main program is listed without a name.
      find->path = info->dlpi_name[0] != '\0' ? info->dlpi_name : "/proc/self/exe";
      return 1;
    }
  }
  return 0;
}

// A read-only mapping of a whole file, unmapped when it goes out of scope.
class MappedFile {
 public:
  explicit MappedFile(const char* path) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const char*>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  // The n bytes at offset, or nullptr when they are not all inside the file.
  const char* At(uint64_t offset, uint64_t n) const {
    if (data_ == nullptr || offset > size_ || n > size_ - offset) return nullptr;
    return data_ + offset;
  }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

int CodeRegionMap::AddFileSymbols(const void* addr, const char* const* names, int n,
                                  CodeRegion region) {
  FindFile find{reinterpret_cast<uintptr_t>(addr)};
  dl_iterate_phdr(VisitFile, &find);
  if (find.path == nullptr) return 0;
  const MappedFile file(find.path);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(file.At(0, sizeof(ElfW(Ehdr))));
  if (eh == nullptr || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(ElfW(Shdr))) {
    return 0;
  }
  const auto* sections = reinterpret_cast<const ElfW(Shdr)*>(
      file.At(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr))));
  if (sections == nullptr) return 0;
  int found = 0;
  for (int s = 0; s < eh->e_shnum; ++s) {
    const ElfW(Shdr)& symtab = sections[s];
    if (symtab.sh_type != SHT_SYMTAB || symtab.sh_link >= eh->e_shnum) continue;
    const ElfW(Shdr)& strtab = sections[symtab.sh_link];
    const auto* syms =
        reinterpret_cast<const ElfW(Sym)*>(file.At(symtab.sh_offset, symtab.sh_size));
    const char* strings = file.At(strtab.sh_offset, strtab.sh_size);
    if (syms == nullptr || strings == nullptr) return 0;
    const size_t nsyms = symtab.sh_size / sizeof(ElfW(Sym));
    for (size_t i = 0; i < nsyms; ++i) {
      const ElfW(Sym)& sym = syms[i];
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 ||
          sym.st_name >= strtab.sh_size) {
        continue;
      }
      const char* name = strings + sym.st_name;
      if (std::memchr(name, '\0', strtab.sh_size - sym.st_name) == nullptr) continue;
      for (int k = 0; k < n; ++k) {
        if (std::strcmp(name, names[k]) != 0) continue;
        const uintptr_t lo = find.bias + sym.st_value;
        if (AddRange(lo, lo + sym.st_size, region)) ++found;
        break;
      }
    }
  }
  return found;
}

}  // namespace peakline::python
