// A stand-in for OpenBLAS in allocation_hooks_test: its file name contains "openblas", and it
// maps and unmaps a work buffer the way OpenBLAS does (an anonymous mapping, through its GOT,
// then bookkeeping of its own: the mmap call is not a tail call).
#include <stddef.h>
#include <sys/mman.h>

static void* volatile pl_fake_blas_last;

void* pl_fake_blas_buffer(size_t n) {
  __asm__ volatile("" : "+r"(n));
  void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pl_fake_blas_last = p;
  return p;
}

int pl_fake_blas_release(void* p, size_t n) {
  __asm__ volatile("" : "+r"(p));
  return munmap(p, n);
}
