// GOT patching; the design, its guarantees and its blind spots are in symbol_patcher.h.
#include "hooks/symbol_patcher.h"

#include <dlfcn.h>
#include <elf.h>
#include <gnu/lib-names.h>
#include <link.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <utility>

namespace peakline::hooks {
namespace {

using Addr = ElfW(Addr);
using Dyn = ElfW(Dyn);
using Phdr = ElfW(Phdr);
using Sym = ElfW(Sym);

// The relocation types that fill a pointer-sized slot with a symbol's address.
#if defined(__x86_64__)
constexpr bool kArchSupported = true;
constexpr unsigned kRelJumpSlot = R_X86_64_JUMP_SLOT;
constexpr unsigned kRelGlobDat = R_X86_64_GLOB_DAT;
constexpr unsigned kRelAbs = R_X86_64_64;
#elif defined(__aarch64__)
constexpr bool kArchSupported = true;
constexpr unsigned kRelJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr unsigned kRelGlobDat = R_AARCH64_GLOB_DAT;
constexpr unsigned kRelAbs = R_AARCH64_ABS64;
#else
constexpr bool kArchSupported = false;
constexpr unsigned kRelJumpSlot = ~0u;
constexpr unsigned kRelGlobDat = ~0u;
constexpr unsigned kRelAbs = ~0u;
#endif

#if __ELF_NATIVE_CLASS == 64
inline unsigned RelType(uint64_t info) { return static_cast<unsigned>(ELF64_R_TYPE(info)); }
inline size_t RelSym(uint64_t info) { return static_cast<size_t>(ELF64_R_SYM(info)); }
#else
inline unsigned RelType(uint64_t info) { return static_cast<unsigned>(ELF32_R_TYPE(info)); }
inline size_t RelSym(uint64_t info) { return static_cast<size_t>(ELF32_R_SYM(info)); }
#endif

uintptr_t PageSize() {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uintptr_t PageDown(uintptr_t a) { return a & ~(PageSize() - 1); }

bool ObjectContains(const dl_phdr_info* info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const Phdr& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (addr >= start && addr - start < ph.p_memsz) return true;
  }
  return false;
}

std::string_view ObjectName(const dl_phdr_info* info) {
  return info->dlpi_name != nullptr ? std::string_view(info->dlpi_name) : std::string_view();
}

// The parts of an object's dynamic section the patcher reads. glibc relocates the d_ptr
// entries in place (adds the load bias) for every object whose dynamic section is writable,
// which excludes the vDSO (skipped) and, on some architectures (RISC-V, MIPS), every object.
// A value below the load bias cannot be an address inside the object, so it is taken as
// unrelocated and the bias added.
struct DynamicInfo {
  const Sym* symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0;
  uintptr_t jmprel = 0;
  size_t pltrelsz = 0;
  long pltrel = 0;  // DT_RELA or DT_REL: the entry format of DT_JMPREL
  uintptr_t rela = 0;
  size_t relasz = 0;
  uintptr_t rel = 0;
  size_t relsz = 0;
};

bool ReadDynamic(const dl_phdr_info* info, DynamicInfo* out) {
  const Dyn* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const Dyn*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
      break;
    }
  }
  if (dyn == nullptr) return false;
  const uintptr_t base = info->dlpi_addr;
  auto ptr = [base](Addr p) -> uintptr_t { return p < base ? p + base : p; };
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: out->symtab = reinterpret_cast<const Sym*>(ptr(dyn->d_un.d_ptr)); break;
      case DT_STRTAB: out->strtab = reinterpret_cast<const char*>(ptr(dyn->d_un.d_ptr)); break;
      case DT_STRSZ: out->strsz = dyn->d_un.d_val; break;
      case DT_JMPREL: out->jmprel = ptr(dyn->d_un.d_ptr); break;
      case DT_PLTRELSZ: out->pltrelsz = dyn->d_un.d_val; break;
      case DT_PLTREL: out->pltrel = static_cast<long>(dyn->d_un.d_val); break;
      case DT_RELA: out->rela = ptr(dyn->d_un.d_ptr); break;
      case DT_RELASZ: out->relasz = dyn->d_un.d_val; break;
      case DT_REL: out->rel = ptr(dyn->d_un.d_ptr); break;
      case DT_RELSZ: out->relsz = dyn->d_un.d_val; break;
      default: break;
    }
  }
  return out->symtab != nullptr && out->strtab != nullptr;
}

int ProtFromFlags(ElfW(Word) flags) {
  return ((flags & PF_R) ? PROT_READ : 0) | ((flags & PF_W) ? PROT_WRITE : 0) |
         ((flags & PF_X) ? PROT_EXEC : 0);
}

// The protection ld.so left on the page holding `addr`, from the program headers alone: the
// PT_GNU_RELRO range, rounded down at both ends as ld.so rounds it before making it
// read-only, else the flags of the PT_LOAD segment that holds the address. -1 if no segment
// holds it.
int SlotProtection(const dl_phdr_info* info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const Phdr& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO) continue;
    uintptr_t start = PageDown(info->dlpi_addr + ph.p_vaddr);
    uintptr_t end = PageDown(info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    if (addr >= start && addr < end) return PROT_READ;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const Phdr& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (addr >= start && addr - start < ph.p_memsz) return ProtFromFlags(ph.p_flags);
  }
  return -1;
}

uintptr_t LoadSlot(uintptr_t addr) {
  return std::atomic_ref<uintptr_t>(*reinterpret_cast<uintptr_t*>(addr))
      .load(std::memory_order_relaxed);
}

// Stores `value` into the pointer-sized slot at `addr` with one atomic store, making its page
// writable for the store if ld.so left it read-only and restoring that protection after.
bool WriteSlot(const dl_phdr_info* info, uintptr_t addr, uintptr_t value) {
  if (addr % alignof(uintptr_t) != 0) return false;
  const int prot = SlotProtection(info, addr);
  if (prot < 0) return false;
  const bool unprotect = (prot & PROT_WRITE) == 0;
  void* page = reinterpret_cast<void*>(PageDown(addr));
  if (unprotect && mprotect(page, PageSize(), prot | PROT_WRITE) != 0) return false;
  std::atomic_ref<uintptr_t>(*reinterpret_cast<uintptr_t*>(addr))
      .store(value, std::memory_order_release);
  if (unprotect) (void)mprotect(page, PageSize(), prot);
  return true;
}

// dlsym's result is unusable as an original if it is missing, the replacement itself, inside
// an object the caller skips, or a non-PIE executable's canonical PLT entry for the name (an
// undefined symbol with a value: calling it would go through a slot we patch, i.e. loop).
bool UsableOriginal(void* candidate, const void* replacement,
                    const std::vector<const void*>& skip_bases) {
  if (candidate == nullptr || candidate == replacement) return false;
  Dl_info dl{};
  void* sym_entry = nullptr;
  if (dladdr1(candidate, &dl, &sym_entry, RTLD_DL_SYMENT) == 0) return true;
  const auto* sym = static_cast<const Sym*>(sym_entry);
  for (const void* b : skip_bases) {
    if (b == dl.dli_fbase) return false;
  }
  if (sym != nullptr && sym->st_shndx == SHN_UNDEF) return false;
  return true;
}

const void* ObjectBaseOf(const void* addr) {
  Dl_info dl{};
  if (dladdr(addr, &dl) == 0) return nullptr;
  return dl.dli_fbase;
}

}  // namespace

// --- scanning ------------------------------------------------------------------------------
//
// A scan runs in three steps, because ld.so lists an object (dl_iterate_phdr shows it) as soon
// as it is mapped, before it is relocated and before its RELRO is protected; writing to it then
// would race with ld.so. (1) A dl_iterate_phdr pass lists the objects not yet patched.
// (2) Outside the iteration, dlopen(name, RTLD_NOLOAD) takes a reference to each: it waits for
// any dlopen in progress (ld.so's load lock) and returns only fully loaded objects of the
// default namespace. (3) A second pass patches the objects we hold, inside the callback, where
// ld.so's list lock also keeps a dlclose from unmapping anything under us.

struct SymbolPatcher::ScanContext {
  SymbolPatcher* self = nullptr;
  bool force_all = false;
  bool first = true;
  bool unchanged = false;
  unsigned long long adds = 0, subs = 0;
  bool have_counters = false;
  struct Candidate {
    uintptr_t base;
    std::string name;
    void* handle = nullptr;
  };
  std::vector<Candidate> candidates;
  bool patch_pass = false;
};

bool SymbolPatcher::IsSkipped(const dl_phdr_info* info) const {
  for (uintptr_t a : skip_addrs_) {
    if (ObjectContains(info, a)) return true;
  }
  // The vDSO and ld.so by name too, in case the aux vector did not name them.
  std::string_view name = ObjectName(info);
  return name.find("linux-vdso") != std::string_view::npos ||
         name.find("linux-gate") != std::string_view::npos ||
         name.find("/ld-linux") != std::string_view::npos;
}

int SymbolPatcher::ScanCallback(dl_phdr_info* info, size_t size, void* data) {
  auto* ctx = static_cast<ScanContext*>(data);
  SymbolPatcher* self = ctx->self;
  self->mu_.AssertHeld();  // called by dl_iterate_phdr inside ScanLocked
  if (ctx->patch_pass) {
    for (const auto& c : ctx->candidates) {
      if (c.handle == nullptr || c.base != info->dlpi_addr || c.name != ObjectName(info)) continue;
      for (auto& obj : self->objects_) {
        if (obj.base == c.base && obj.name == c.name) {
          self->PatchObject(info, &obj, &self->stats_);
          break;
        }
      }
      break;
    }
    return 0;
  }
  if (ctx->first) {
    ctx->first = false;
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
      ctx->have_counters = true;
      ctx->adds = info->dlpi_adds;
      ctx->subs = info->dlpi_subs;
      if (!ctx->force_all && ctx->adds == self->last_adds_ && ctx->subs == self->last_subs_) {
        ctx->unchanged = true;
        return 1;  // nothing loaded or unloaded since the last scan
      }
      // After an unload a new object may occupy a forgotten one's (base, name): re-check all.
      if (ctx->subs != self->last_subs_) ctx->force_all = true;
    } else {
      ctx->force_all = true;
    }
  }
  if (self->IsSkipped(info)) return 0;
  const uintptr_t base = info->dlpi_addr;
  const std::string_view name = ObjectName(info);
  bool known = false;
  for (auto& obj : self->objects_) {
    if (obj.base == base && obj.name == name) {
      obj.seen = true;
      known = true;
      break;
    }
  }
  if (known && !ctx->force_all) return 0;
  if (!known) self->objects_.push_back(PatchedObject{base, std::string(name), {}, true});
  ctx->candidates.push_back(ScanContext::Candidate{base, std::string(name)});
  return 0;
}

void SymbolPatcher::ScanLocked(bool force_all) {
  if (!installed()) return;
  ScanContext ctx;
  ctx.self = this;
  ctx.force_all = force_all;
  for (auto& obj : objects_) obj.seen = false;
  dl_iterate_phdr(&SymbolPatcher::ScanCallback, &ctx);
  if (ctx.unchanged) return;
  stats_ = PatchStats{};
  if (ctx.force_all) {
    // Objects no longer listed were unloaded: their slots are gone with them.
    std::erase_if(objects_, [](const PatchedObject& o) { return !o.seen; });
  }
  last_adds_ = ctx.adds;
  last_subs_ = ctx.subs;
  bool any = false;
  for (auto& c : ctx.candidates) {
    c.handle = dlopen(c.name.empty() ? nullptr : c.name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (c.handle == nullptr) continue;
    // The reference must be to this very object (not a namesake in another namespace).
    struct link_map* lm = nullptr;
    if (dlinfo(c.handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr || lm->l_addr != c.base) {
      dlclose(c.handle);
      c.handle = nullptr;
      continue;
    }
    any = true;
  }
  if (any) {
    ctx.patch_pass = true;
    dl_iterate_phdr(&SymbolPatcher::ScanCallback, &ctx);
  }
  for (auto& c : ctx.candidates) {
    if (c.handle != nullptr) dlclose(c.handle);
  }
  // Objects that could not be referenced (still loading elsewhere, other namespace) are
  // forgotten so that a later scan tries again.
  std::erase_if(objects_, [&ctx](const PatchedObject& o) {
    if (!o.slots.empty()) return false;
    for (const auto& c : ctx.candidates) {
      if (c.base == o.base && c.name == o.name) return c.handle == nullptr;
    }
    return false;
  });
  if (std::any_of(ctx.candidates.begin(), ctx.candidates.end(),
                  [](const auto& c) { return c.handle == nullptr; })) {
    // Make the next PatchNewObjects look again even if nothing else changes.
    last_adds_ = ~0ull;
  }
}

void SymbolPatcher::PatchObject(const dl_phdr_info* info, PatchedObject* object,
                                PatchStats* stats) {
  DynamicInfo dyn;
  if (!ReadDynamic(info, &dyn)) return;
  ++stats->objects_scanned;
  const uintptr_t base = info->dlpi_addr;
  // Taken here, under mu_ (the analysis checks a lambda's body on its own, without it).
  const Entry* const entries = entries_.data();
  const size_t n_entries = entries_.size();

  auto visit = [&](uintptr_t r_offset, uint64_t r_info) {
    const unsigned type = static_cast<unsigned>(RelType(r_info));
    if (type != kRelJumpSlot && type != kRelGlobDat && type != kRelAbs) return;
    const size_t sym_index = RelSym(r_info);
    if (sym_index == 0) return;
    const Sym& sym = dyn.symtab[sym_index];
    if (dyn.strsz != 0 && sym.st_name >= dyn.strsz) return;
    const char* sym_name = dyn.strtab + sym.st_name;
    for (const Entry* e_at = entries; e_at != entries + n_entries; ++e_at) {
      const Entry& e = *e_at;
      if (e.name[0] != sym_name[0] || std::strcmp(e.name.c_str(), sym_name) != 0) continue;
      const uintptr_t slot = base + r_offset;
      if (slot % alignof(uintptr_t) != 0 || !ObjectContains(info, slot)) return;
      const uintptr_t current = LoadSlot(slot);
      if (current == e.replacement) return;  // ours already (a re-check after a dlclose)
      // What the object calls now must be what the replacement forwards to; an unresolved
      // lazy PLT slot (pointing back into the object's own PLT) will bind to it too.
      const bool lazy_stub = type == kRelJumpSlot && sym.st_shndx == SHN_UNDEF &&
                             ObjectContains(info, current);
      if (current != e.original && !lazy_stub) {
        ++stats->slots_foreign;
        return;
      }
      if (!WriteSlot(info, slot, e.replacement)) {
        ++stats->slots_failed;
        return;
      }
      ++stats->slots_patched;
      if (current != e.original) ++stats->slots_unbound;
      for (PatchedSlot& s : object->slots) {
        if (s.address == slot) {
          s = PatchedSlot{slot, current, e.replacement};
          return;
        }
      }
      object->slots.push_back(PatchedSlot{slot, current, e.replacement});
      return;
    }
  };
  auto walk_rela = [&](uintptr_t table, size_t bytes) {
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) visit(r[i].r_offset, r[i].r_info);
  };
  auto walk_rel = [&](uintptr_t table, size_t bytes) {
    const auto* r = reinterpret_cast<const ElfW(Rel)*>(table);
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rel)); ++i) visit(r[i].r_offset, r[i].r_info);
  };
  if (dyn.jmprel != 0) {
    if (dyn.pltrel == DT_REL) {
      walk_rel(dyn.jmprel, dyn.pltrelsz);
    } else {
      walk_rela(dyn.jmprel, dyn.pltrelsz);
    }
  }
  if (dyn.rela != 0) walk_rela(dyn.rela, dyn.relasz);
  if (dyn.rel != 0) walk_rel(dyn.rel, dyn.relsz);
}

// --- locking -------------------------------------------------------------------------------
//
// mu_ is a plain pthread mutex rather than std::mutex because PatchNewObjects only *tries* it,
// possibly on the thread that holds it (a dlopen replacement reached from inside a scan, e.g.
// when the caller's own dlopen slot in an unskipped object is patched): pthread_mutex_trylock
// then returns EBUSY, which is defined; std::mutex::try_lock would be undefined. A scan that
// cannot take the lock sets pending_ and returns at once; whoever holds the lock re-scans
// before and after releasing it. So PatchNewObjects never blocks and cannot deadlock with
// ld.so's load lock (a dlopen inside a library constructor reaching our dlopen replacement
// while another thread's scan waits in dlopen(RTLD_NOLOAD) for that very load to finish).

void SymbolPatcher::Unlock() {
  for (;;) {
    while (pending_.exchange(false, std::memory_order_acq_rel)) ScanLocked(false);
    mu_.Unlock();
    if (!pending_.load(std::memory_order_acquire)) return;
    if (!mu_.TryLock()) return;
  }
}

class PEAKLINE_SCOPED_CAPABILITY SymbolPatcher::ScanLock {
 public:
  explicit ScanLock(SymbolPatcher* self) PEAKLINE_ACQUIRE(self->mu_) : self_(self) {
    self_->mu_.Lock();
  }
  ~ScanLock() PEAKLINE_RELEASE() { self_->Unlock(); }
  ScanLock(const ScanLock&) = delete;
  ScanLock& operator=(const ScanLock&) = delete;

 private:
  SymbolPatcher* const self_;
};

Status SymbolPatcher::Install(const Interposition* table, size_t n, const void* const* skip_addrs,
                              size_t n_skip) {
  auto fail = [](std::string message) { return Status::Error(std::move(message)); };
  if (!kArchSupported) return fail("symbol patching is not implemented for this architecture");
  if (table == nullptr && n != 0) return fail("null interposition table");
  for (size_t i = 0; i < n; ++i) {
    if (table[i].name == nullptr || table[i].name[0] == '\0' || table[i].replacement == nullptr ||
        table[i].original == nullptr) {
      return fail("interposition " + std::to_string(i) + " has a null name, replacement or original");
    }
    for (size_t j = 0; j < i; ++j) {
      if (std::strcmp(table[i].name, table[j].name) == 0) {
        return fail(std::string("interposition of ") + table[i].name + " listed twice");
      }
    }
  }

  ScanLock lock(this);
  if (installed()) return fail("symbol patcher already installed");

  std::vector<const void*> skip_bases;
  for (size_t i = 0; i < n_skip; ++i) {
    if (const void* b = ObjectBaseOf(skip_addrs[i])) skip_bases.push_back(b);
  }
  void* libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
  if (libc == nullptr) return fail(std::string("cannot find the loaded ") + LIBC_SO);
  struct link_map* libc_map = nullptr;
  if (dlinfo(libc, RTLD_DI_LINKMAP, &libc_map) != 0 || libc_map == nullptr) {
    dlclose(libc);
    return fail(std::string("dlinfo failed on ") + LIBC_SO);
  }

  // Every original is resolved before any slot is written.
  std::vector<Entry> entries;
  entries.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    void* original = dlsym(RTLD_DEFAULT, table[i].name);
    if (!UsableOriginal(original, table[i].replacement, skip_bases)) {
      original = dlsym(libc, table[i].name);
    }
    if (!UsableOriginal(original, table[i].replacement, skip_bases)) {
      dlclose(libc);
      return fail(std::string("cannot resolve the original ") + table[i].name);
    }
    entries.push_back(Entry{table[i].name, reinterpret_cast<uintptr_t>(table[i].replacement),
                            reinterpret_cast<uintptr_t>(original)});
  }
  std::vector<uintptr_t> skip;
  for (size_t i = 0; i < n_skip; ++i) skip.push_back(reinterpret_cast<uintptr_t>(skip_addrs[i]));
  skip.push_back(reinterpret_cast<uintptr_t>(libc_map->l_ld));  // libc: its dynamic section
  dlclose(libc);
  if (unsigned long ldso = getauxval(AT_BASE)) skip.push_back(ldso);
  if (unsigned long vdso = getauxval(AT_SYSINFO_EHDR)) skip.push_back(vdso);

  // Written only when they change (a re-Install finds them equal), so that replacements still
  // running from an earlier installation may read them with plain loads, race-free.
  for (size_t i = 0; i < n; ++i) {
    std::atomic_ref<void*> original(*table[i].original);
    void* value = reinterpret_cast<void*>(entries[i].original);
    if (original.load(std::memory_order_relaxed) != value) {
      original.store(value, std::memory_order_release);
    }
  }

  entries_ = std::move(entries);
  skip_addrs_ = std::move(skip);
  objects_.clear();
  installed_.store(true, std::memory_order_release);
  ScanLocked(/*force_all=*/true);
  return Status();
}

void SymbolPatcher::PatchNewObjects() {
  pending_.store(true, std::memory_order_release);
  if (!mu_.TryLock()) return;  // the holder re-scans before it unlocks
  Unlock();
}

int SymbolPatcher::RestoreCallback(dl_phdr_info* info, size_t, void* data) {
  auto* self = static_cast<SymbolPatcher*>(data);
  self->mu_.AssertHeld();  // called by dl_iterate_phdr inside Uninstall
  for (PatchedObject& obj : self->objects_) {
    if (obj.base != info->dlpi_addr || obj.name != ObjectName(info)) continue;
    for (const PatchedSlot& s : obj.slots) {
      if (!ObjectContains(info, s.address)) continue;
      if (LoadSlot(s.address) == s.replacement) (void)WriteSlot(info, s.address, s.previous);
    }
    obj.slots.clear();
    break;
  }
  return 0;
}

void SymbolPatcher::Uninstall() {
  ScanLock lock(this);
  if (installed()) {
    dl_iterate_phdr(&SymbolPatcher::RestoreCallback, this);
    installed_.store(false, std::memory_order_release);
    objects_.clear();
    entries_.clear();
    skip_addrs_.clear();
  }
}

PatchStats SymbolPatcher::last_stats() const {
  mu_.Lock();
  PatchStats s = stats_;
  mu_.Unlock();
  return s;
}

}  // namespace peakline::hooks
