// libpeakline_testalloc: a tiny shared library whose functions reach the allocator and copy
// functions through every kind of dynamic relocation the symbol patcher rewrites, for
// symbol_patcher_test. Built twice: with -z relro -z now (every GOT slot read-only once
// relocated) and with -z lazy -z norelro (PLT slots bound on first call, GOT writable).
#ifndef PEAKLINE_TESTS_NATIVE_TESTLIB_TESTALLOC_H_
#define PEAKLINE_TESTS_NATIVE_TESTLIB_TESTALLOC_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Calls through the PLT (R_*_JUMP_SLOT).
void* pl_ta_malloc(size_t n);
void pl_ta_free(void* p);
void* pl_ta_calloc(size_t n, size_t size);
void* pl_ta_realloc(void* p, size_t n);
int pl_ta_posix_memalign(void** out, size_t alignment, size_t n);
void* pl_ta_mmap(size_t n);  // anonymous private read-write mapping; MAP_FAILED on error
int pl_ta_munmap(void* p, size_t n);
void* pl_ta_memcpy(void* dst, const void* src, size_t n);

// malloc through a pointer whose address the code loads from the GOT at run time
// (R_*_GLOB_DAT).
void* pl_ta_malloc_via_got(size_t n);
// malloc and free through pointers stored in initialised writable data (R_X86_64_64 /
// R_AARCH64_ABS64 in .data).
void* pl_ta_malloc_via_data(size_t n);
void pl_ta_free_via_data(void* p);
// malloc and memcpy through a constant table (R_X86_64_64 in .data.rel.ro, inside RELRO).
void* pl_ta_malloc_via_const_table(size_t n);
void* pl_ta_memcpy_via_const_table(void* dst, const void* src, size_t n);
// malloc called from a translation unit compiled with -fno-plt (R_*_GLOB_DAT, no PLT).
void* pl_ta_malloc_noplt(size_t n);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // PEAKLINE_TESTS_NATIVE_TESTLIB_TESTALLOC_H_
