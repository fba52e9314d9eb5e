/* A plain C library (no Python API) for tests/programs/native_thread_burst.py: burst(n)
 * starts a pthread that mallocs, touches and frees n blocks of 8 MiB, and joins it. The
 * thread never has a Python thread state. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static void *work(void *arg) {
  const intptr_t n = (intptr_t)arg;
  for (intptr_t i = 0; i < n; i++) {
    volatile char *p = malloc(8 << 20);
    if (p == NULL) continue;
    for (int j = 0; j < (8 << 20); j += 4096) p[j] = 1;
    free((void *)p);
  }
  return NULL;
}

void burst(int n) {
  pthread_t t;
  if (pthread_create(&t, NULL, work, (void *)(intptr_t)n) == 0) pthread_join(t, NULL);
}
