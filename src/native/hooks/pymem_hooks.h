// Python-domain allocator wrappers: PyMem_SetAllocator for PYMEM_DOMAIN_MEM and
// PYMEM_DOMAIN_OBJ, forwarding every call to the allocator that was installed before (so
// blocks allocated before or after the session are freed by the right allocator, and the
// program's memory layout is unchanged: no headers are added).
//
// GIL held for Install/Uninstall (as PyMem_SetAllocator requires); the wrappers run wherever
// the interpreter allocates (always with the GIL for these two domains).
#ifndef PEAKLINE_HOOKS_PYMEM_HOOKS_H_
#define PEAKLINE_HOOKS_PYMEM_HOOKS_H_

namespace peakline::hooks {

void InstallPyMemHooks();
void UninstallPyMemHooks();

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_PYMEM_HOOKS_H_
