// dlopen on behalf of another object.
//
// glibc resolves a bare library name ("libfoo.so", no slash) with the DT_RPATH/DT_RUNPATH of
// the object that *called* dlopen. Once dlopen is interposed, that caller is peakline's hook,
// so a library that loads a sibling by bare name through its own RUNPATH ($ORIGIN/...) would
// stop finding it. DlopenAsCaller restores the caller's view: an already loaded library is
// returned as is (RTLD_NOLOAD), then the caller's RUNPATH/RPATH directories are tried with
// $ORIGIN expanded, then the plain search (LD_LIBRARY_PATH, ld.so.cache, default dirs).
//
// Not a hot path (it may allocate); called from the dlopen replacement only.
#ifndef PEAKLINE_HOOKS_DLOPEN_SEARCH_H_
#define PEAKLINE_HOOKS_DLOPEN_SEARCH_H_

namespace peakline::hooks {

using DlopenFn = void* (*)(const char*, int);

void* DlopenAsCaller(DlopenFn real_dlopen, const char* file, int flags, const void* caller);

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_DLOPEN_SEARCH_H_
