// Run-time interposition of library functions (malloc, mmap, memcpy, dlopen, ...) by
// rewriting the GOT slots of the shared objects already loaded into this process, plus a
// re-scan after every dlopen. Unlike LD_PRELOAD this works inside an interpreter that is
// already running (the Python API, Jupyter, pytest): no re-exec, no environment variable.
//
// What gets rewritten. For every loaded object except ld.so, the vDSO, libc and the objects
// the caller asks to skip (its own extension module), the patcher walks the relocations of
// its dynamic section (DT_JMPREL with DT_PLTREL saying REL or RELA, then DT_RELA and DT_REL)
// and, for each relocation against one of the interposed names, of type
//   JUMP_SLOT  calls through the PLT (lazy or -z now),
//   GLOB_DAT   addresses loaded from the GOT: `f = &malloc` in code, -fno-plt calls,
//   64 / ABS64 pointers stored in initialised data: `static void* (*p)(size_t) = &malloc`,
// stores the replacement into the slot that relocation filled in. A slot is rewritten only if
// it holds what the object would otherwise call: the original (see below), or, for a PLT slot
// not yet bound by lazy binding, the stub inside the object itself. A slot bound to anything
// else is left alone (counted in PatchStats::slots_foreign): another allocator found in a
// library's local scope, an old symbol version such as memcpy@GLIBC_2.2.5, a pointer with an
// addend, a non-PIE executable's canonical PLT entry (calls through it reach the executable's
// own PLT slot, which is patched). Forwarding those to our original would change what the
// program calls, e.g. free() memory with a different allocator than the one that made it.
//
// The originals. Each `*original` is resolved once, before any slot is written, with
// dlsym(RTLD_DEFAULT, name): the definition that the global lookup, hence the slots, bind to,
// an LD_PRELOADed allocator (or a sanitizer runtime) included, and for IFUNC symbols such as
// memcpy the implementation the resolver picks. If that lookup finds the replacement itself,
// a skipped object, or a non-PIE executable's canonical PLT entry (an undefined symbol with a
// value, which would loop back through the patched slot), the patcher falls back to the copy
// reached through libc's own handle. Each `*original` is stored (atomically, and only if its
// value changes) before the first slot is written; it is never reset, not even by Uninstall,
// so a replacement still running on another thread always has somewhere to forward to, and a
// re-Install, which finds the same values, does not write to them again. Replacements should
// read them with a relaxed atomic load (`__atomic_load_n(&p, __ATOMIC_RELAXED)`, a plain load
// on x86-64 and aarch64), which keeps TSan quiet: it cannot see that the GOT store through
// which a thread reached the replacement came after the store of the original.
//
// RELRO. With -z relro the GOT is made read-only once relocated. A slot's current protection
// is derived from the object's program headers (PT_GNU_RELRO, page-rounded the way ld.so
// rounds it, else the flags of the PT_LOAD that holds it); a page that is not writable is
// made writable for the store and given back exactly that protection afterwards.
//
// Thread safety. Install, PatchNewObjects and Uninstall are serialised by the patcher's mutex
// and may allocate; they must never run on a hook's hot path (the dlopen replacement calls
// PatchNewObjects after the real dlopen has returned, which is allowed). Objects are patched
// only once fully loaded and relocated (a dlopen(RTLD_NOLOAD) reference proves it), inside
// their dl_iterate_phdr callback, so ld.so's list lock keeps a concurrent dlclose from
// unmapping them meanwhile. A slot is written with one aligned pointer-sized atomic store:
// a thread calling through it at the same moment gets either the old or the new function,
// both valid. installed() may be read from any thread.
//
// Blind spots (by construction): function pointers copied elsewhere before Install (a
// pointer saved at run time, the result of dlsym(..., "malloc")); statically linked
// allocators and objects linked without dynamic relocations for the name (-Bsymbolic,
// hidden aliases); calls libc makes to itself (libc is never patched); raw syscalls; slots
// bound to another definition or symbol version (see above); objects in dlmopen namespaces
// (dl_iterate_phdr lists only ours); an object loaded by a thread between its dlopen
// returning and the PatchNewObjects that follows may run a few calls unpatched. A program's
// own plain reads of a patched data pointer race, formally, with our atomic store (benign on
// x86-64/aarch64; visible to TSan only if that program is instrumented).
//
// For the dlopen replacement: the real dlopen resolves a bare library name with the RUNPATH
// of its *caller*, which becomes the replacement's object instead of the one that called
// dlopen. Retry with the caller's search path, or resolve the path first, if that matters.
#ifndef PEAKLINE_HOOKS_SYMBOL_PATCHER_H_
#define PEAKLINE_HOOKS_SYMBOL_PATCHER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "status/status.h"
#include "sync/mutex.h"
#include "sync/thread_annotations.h"

struct dl_phdr_info;  // <link.h>

namespace peakline::hooks {

// One function to interpose: every importing object's slots for `name` are redirected to
// `replacement`; `*original` receives the implementation the program used before.
struct Interposition {
  const char* name;
  void* replacement;
  void** original;
};

// The Interposition of a typed replacement and the typed slot that receives the original.
template <typename F>
Interposition MakeInterposition(const char* name, F replacement, F* original) {
  return Interposition{name, reinterpret_cast<void*>(replacement),
                       reinterpret_cast<void**>(original)};
}

// Counts of the last Install or PatchNewObjects, for tests and diagnostics.
struct PatchStats {
  size_t objects_scanned = 0;  // objects whose relocations were walked
  size_t slots_patched = 0;    // slots rewritten to a replacement
  size_t slots_unbound = 0;    // of those, PLT slots lazy binding had not bound yet
  size_t slots_foreign = 0;    // slots for an interposed name, bound elsewhere: left alone
  size_t slots_failed = 0;     // slots whose page could not be made writable
};

class SymbolPatcher {
 public:
  SymbolPatcher() = default;
  SymbolPatcher(const SymbolPatcher&) = delete;
  SymbolPatcher& operator=(const SymbolPatcher&) = delete;
  // Does not uninstall: a patcher that may still be installed must outlive its slots (the
  // allocation and process hooks allocate theirs once and never destroy them).
  ~SymbolPatcher() = default;

  // Resolves every original, then patches all loaded objects. `table` (n entries, names and
  // replacements distinct and non-null) is copied. skip_addrs: addresses (e.g. of a function
  // of the caller's extension module) whose containing objects are never patched. Fails when
  // already installed or when an original cannot be resolved; then nothing has been patched.
  // Slots that could not be written do not fail the call (see last_stats()).
  Status Install(const Interposition* table, size_t n, const void* const* skip_addrs,
                 size_t n_skip) PEAKLINE_EXCLUDES(mu_);

  // Patches objects loaded since the last scan. Cheap when nothing was loaded or unloaded
  // (one dl_iterate_phdr step that compares ld.so's load/unload counters); after a dlclose
  // every object is re-checked, since a new one may sit at a forgotten object's address.
  // Never blocks: if another thread (or this one, re-entering through a patched dlopen) holds
  // the patcher's lock, the holder does the scan before it releases the lock, and this call
  // returns at once. No-op when not installed.
  void PatchNewObjects();

  // Restores every slot we changed to the value it held before, if it still holds our
  // replacement and its object is still loaded. The originals stay valid.
  void Uninstall() PEAKLINE_EXCLUDES(mu_);

  bool installed() const { return installed_.load(std::memory_order_acquire); }

  PatchStats last_stats() const PEAKLINE_EXCLUDES(mu_);

 private:
  struct PatchedSlot {
    uintptr_t address;
    uintptr_t previous;     // what the slot held before we wrote to it
    uintptr_t replacement;  // what we wrote
  };
  struct PatchedObject {
    uintptr_t base;
    std::string name;
    std::vector<PatchedSlot> slots;
    bool seen;  // present in the current scan
  };
  struct Entry {
    std::string name;
    uintptr_t replacement;
    uintptr_t original;
  };
  struct ScanContext;

  // Holds mu_ for its scope, and runs the scans other threads asked for before it releases it.
  class ScanLock;

  // Walks the loaded objects and patches those not patched yet (all of them: force_all).
  void ScanLocked(bool force_all) PEAKLINE_REQUIRES(mu_);
  // Runs the scans other threads asked for, then releases mu_ (see the .cc on locking).
  void Unlock() PEAKLINE_RELEASE(mu_);
  // dl_iterate_phdr callbacks, run by ScanLocked and Uninstall while they hold mu_.
  static int ScanCallback(::dl_phdr_info* info, size_t size, void* data);
  static int RestoreCallback(::dl_phdr_info* info, size_t size, void* data);
  bool IsSkipped(const ::dl_phdr_info* info) const PEAKLINE_REQUIRES(mu_);
  void PatchObject(const ::dl_phdr_info* info, PatchedObject* object, PatchStats* stats)
      PEAKLINE_REQUIRES(mu_);

  // A pthread mutex, not std::mutex: PatchNewObjects only tries it, maybe on the thread that
  // holds it, which pthread_mutex_trylock defines (EBUSY) and std::mutex does not.
  mutable PthreadMutex mu_;
  std::atomic<bool> installed_{false};
  std::atomic<bool> pending_{false};  // a PatchNewObjects found mu_ taken
  std::vector<Entry> entries_ PEAKLINE_GUARDED_BY(mu_);
  // Our own objects, plus libc, ld.so and the vDSO.
  std::vector<uintptr_t> skip_addrs_ PEAKLINE_GUARDED_BY(mu_);
  std::vector<PatchedObject> objects_ PEAKLINE_GUARDED_BY(mu_);
  unsigned long long last_adds_ PEAKLINE_GUARDED_BY(mu_) = 0;
  unsigned long long last_subs_ PEAKLINE_GUARDED_BY(mu_) = 0;
  PatchStats stats_ PEAKLINE_GUARDED_BY(mu_);
};

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_SYMBOL_PATCHER_H_
