// See testalloc.h. Every call's argument and result pass through an empty asm so that the
// compiler can neither elide an allocation nor fold a stored pointer into a direct call.
#include "testalloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PL_OPAQUE(x) __asm__ volatile("" : "+r"(x))

void* pl_ta_malloc(size_t n) {
  PL_OPAQUE(n);
  return malloc(n);
}
void pl_ta_free(void* p) {
  PL_OPAQUE(p);
  free(p);
}
void* pl_ta_calloc(size_t n, size_t size) {
  PL_OPAQUE(n);
  return calloc(n, size);
}
void* pl_ta_realloc(void* p, size_t n) {
  PL_OPAQUE(p);
  return realloc(p, n);
}
int pl_ta_posix_memalign(void** out, size_t alignment, size_t n) {
  PL_OPAQUE(n);
  return posix_memalign(out, alignment, n);
}
void* pl_ta_mmap(size_t n) {
  return mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
int pl_ta_munmap(void* p, size_t n) { return munmap(p, n); }
void* pl_ta_memcpy(void* dst, const void* src, size_t n) {
  PL_OPAQUE(n);
  return memcpy(dst, src, n);
}

void* pl_ta_malloc_via_got(size_t n) {
  void* (*fn)(size_t) = &malloc;
  PL_OPAQUE(fn);
  return fn(n);
}

// Not static, so that the compiler cannot prove them constant and move them to .data.rel.ro.
__attribute__((visibility("hidden"))) void* (*stored_malloc)(size_t) = &malloc;
__attribute__((visibility("hidden"))) void (*stored_free)(void*) = &free;

void* pl_ta_malloc_via_data(size_t n) {
  // An atomic load: the symbol patcher rewrites these pointers while other threads call
  // through them (symbol_patcher_test's concurrency test, which TSan checks).
  void* (*fn)(size_t) = __atomic_load_n(&stored_malloc, __ATOMIC_RELAXED);
  return fn(n);
}
void pl_ta_free_via_data(void* p) {
  void (*fn)(void*) = __atomic_load_n(&stored_free, __ATOMIC_RELAXED);
  fn(p);
}

// Read with atomic loads, which the compiler does not fold into the constants they hold.
struct ConstTable {
  void* (*malloc_fn)(size_t);
  void* (*memcpy_fn)(void*, const void*, size_t);
};
static const struct ConstTable kTable = {&malloc, &memcpy};

void* pl_ta_malloc_via_const_table(size_t n) {
  void* (*fn)(size_t) = __atomic_load_n(&kTable.malloc_fn, __ATOMIC_RELAXED);
  return fn(n);
}
void* pl_ta_memcpy_via_const_table(void* dst, const void* src, size_t n) {
  void* (*fn)(void*, const void*, size_t) = __atomic_load_n(&kTable.memcpy_fn, __ATOMIC_RELAXED);
  return fn(dst, src, n);
}
