#include "engine/code_regions.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>

namespace peakline::engine {

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

}  // namespace peakline::engine
