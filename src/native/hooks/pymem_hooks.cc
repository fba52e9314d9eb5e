#include "hooks/pymem_hooks.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstring>

#include "hooks/python_domain.h"

namespace peakline::hooks {

namespace {

// The allocator our wrapper forwards to, in the layout hooks/python_domain.h works on.
static_assert(sizeof(PyMemAllocatorEx) == sizeof(DomainAllocator) &&
              offsetof(PyMemAllocatorEx, ctx) == offsetof(DomainAllocator, ctx) &&
              offsetof(PyMemAllocatorEx, malloc) == offsetof(DomainAllocator, malloc) &&
              offsetof(PyMemAllocatorEx, calloc) == offsetof(DomainAllocator, calloc) &&
              offsetof(PyMemAllocatorEx, realloc) == offsetof(DomainAllocator, realloc) &&
              offsetof(PyMemAllocatorEx, free) == offsetof(DomainAllocator, free));

struct Wrapped {
  PyMemAllocatorDomain domain;
  DomainAllocator original;
  bool installed;
};
Wrapped g_mem{PYMEM_DOMAIN_MEM, {}, false};
Wrapped g_obj{PYMEM_DOMAIN_OBJ, {}, false};

// One set of functions per domain, so that ctx can stay the original allocator's own: the
// original free is then installed as it is, and a Python object's death costs nothing extra
// (hooks/python_domain.h: a sampled block's free is seen by the native free hook). Only in
// probe mode does Free<W> take its place.
template <Wrapped& W>
void* Malloc(void*, size_t size) {
  return DomainMalloc(W.original, size);
}
template <Wrapped& W>
void* Calloc(void*, size_t n, size_t size) {
  return DomainCalloc(W.original, n, size);
}
template <Wrapped& W>
void* Realloc(void*, void* old, size_t size) {
  return DomainRealloc(W.original, old, size);
}
template <Wrapped& W>
void Free(void*, void* ptr) {
  DomainFree(W.original, ptr);
}

template <Wrapped& W>
PyMemAllocatorEx Ours(bool probing) {
  return PyMemAllocatorEx{W.original.ctx, Malloc<W>, Calloc<W>, Realloc<W>,
                          probing ? Free<W> : W.original.free};
}

template <Wrapped& W>
bool OnTop() {
  PyMemAllocatorEx current;
  PyMem_GetAllocator(W.domain, &current);
  return current.malloc == Malloc<W>;
}

// Returns whether the allocator underneath is another wrapper (ctx set: tracemalloc, debug
// hooks; pymalloc's, malloc's and mimalloc's ctx is NULL).
template <Wrapped& W>
bool Install() {
  if (!W.installed) {
    PyMemAllocatorEx original;
    PyMem_GetAllocator(W.domain, &original);
    std::memcpy(&W.original, &original, sizeof(original));
    PyMemAllocatorEx mine = Ours<W>(false);
    PyMem_SetAllocator(W.domain, &mine);
    W.installed = true;
  }
  return W.original.ctx != nullptr;
}

template <Wrapped& W>
void Uninstall() {
  // Restore only if nobody wrapped us since; otherwise stay in place as a pass-through.
  if (!W.installed || !OnTop<W>()) return;
  PyMemAllocatorEx original;
  std::memcpy(&original, &W.original, sizeof(original));
  PyMem_SetAllocator(W.domain, &original);
  W.installed = false;
}

// Probe mode starts (GIL held, at a sampling point): every Python-domain free must reach
// DomainFree from now on. Impossible where another wrapper was installed over ours.
bool StartProbing() {
  if (!OnTop<g_mem>() || !OnTop<g_obj>()) return false;
  PyMemAllocatorEx mem = Ours<g_mem>(true), obj = Ours<g_obj>(true);
  PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &mem);
  PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &obj);
  return true;
}

}  // namespace

void InstallPyMemHooks() {
  SetProbeModeSwitch(&StartProbing);
  const bool mem_wrapped = Install<g_mem>();
  const bool obj_wrapped = Install<g_obj>();
  if ((mem_wrapped || obj_wrapped) && StartProbing()) ProbePythonFreesFromNow();
}

void UninstallPyMemHooks() {
  Uninstall<g_obj>();
  Uninstall<g_mem>();
}

}  // namespace peakline::hooks
