// Compiled with -fno-plt: the call below loads malloc's address from a GOT slot filled by an
// R_*_GLOB_DAT relocation instead of jumping through a PLT stub.
#include <stdlib.h>

#include "testalloc.h"

void* pl_ta_malloc_noplt(size_t n) {
  __asm__ volatile("" : "+r"(n));
  return malloc(n);
}
