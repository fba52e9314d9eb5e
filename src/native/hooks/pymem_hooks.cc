#include "hooks/pymem_hooks.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hooks/allocation_hooks.h"

namespace peakline::hooks {

namespace {

struct Wrapped {
  PyMemAllocatorDomain domain;
  PyMemAllocatorEx original;
  bool installed;
};
Wrapped g_mem{PYMEM_DOMAIN_MEM, {}, false};
Wrapped g_obj{PYMEM_DOMAIN_OBJ, {}, false};

struct DomainScope {
  DomainScope() { EnterPythonDomain(); }
  ~DomainScope() { LeavePythonDomain(); }
};

void* Malloc(void* ctx, size_t size) {
  auto* w = static_cast<Wrapped*>(ctx);
  void* p;
  {
    DomainScope scope;
    p = w->original.malloc(w->original.ctx, size);
  }
  OnPythonAlloc(p, size);
  return p;
}

void* Calloc(void* ctx, size_t n, size_t size) {
  auto* w = static_cast<Wrapped*>(ctx);
  void* p;
  {
    DomainScope scope;
    p = w->original.calloc(w->original.ctx, n, size);
  }
  OnPythonAlloc(p, n * size);
  return p;
}

void* Realloc(void* ctx, void* old, size_t size) {
  auto* w = static_cast<Wrapped*>(ctx);
  OnPythonFree(old);
  void* p;
  {
    DomainScope scope;
    p = w->original.realloc(w->original.ctx, old, size);
  }
  OnPythonAlloc(p, size);
  return p;
}

void Free(void* ctx, void* ptr) {
  auto* w = static_cast<Wrapped*>(ctx);
  OnPythonFree(ptr);
  // No DomainScope: a block of this domain was only ever sampled here (its native malloc
  // ran inside the domain), so the free() underneath finds nothing to remove either way,
  // and the two thread-local updates are saved on every Python object's death.
  w->original.free(w->original.ctx, ptr);
}

void Install(Wrapped& w) {
  if (w.installed) return;
  PyMem_GetAllocator(w.domain, &w.original);
  PyMemAllocatorEx mine{&w, Malloc, Calloc, Realloc, Free};
  PyMem_SetAllocator(w.domain, &mine);
  w.installed = true;
}

void Uninstall(Wrapped& w) {
  if (!w.installed) return;
  PyMemAllocatorEx current;
  PyMem_GetAllocator(w.domain, &current);
  // Restore only if nobody wrapped us since; otherwise stay in place as a pass-through.
  if (current.malloc == Malloc && current.ctx == &w) {
    PyMem_SetAllocator(w.domain, &w.original);
    w.installed = false;
  }
}

}  // namespace

void InstallPyMemHooks() {
  Install(g_mem);
  Install(g_obj);
}

void UninstallPyMemHooks() {
  Uninstall(g_obj);
  Uninstall(g_mem);
}

}  // namespace peakline::hooks
