/* A tiny C extension for the tests: allocates native memory with malloc and with an
 * anonymous mmap, touches every page, and keeps it until release() — the known truth the
 * profiler's per-line native bytes are compared with — and blocks right after a signal
 * (signal_then_block). Built by the tests with the system compiler (the testext_dir fixture
 * in tests/python/conftest.py), loaded with dlopen like any extension. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_BLOCKS 64
static void *blocks[MAX_BLOCKS];
static size_t sizes[MAX_BLOCKS];
static int is_mmap[MAX_BLOCKS];
static int nblocks;

static PyObject *keep(PyObject *args, int use_mmap) {
  Py_ssize_t n;
  if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
  if (nblocks >= MAX_BLOCKS) return PyErr_Format(PyExc_RuntimeError, "too many blocks");
  void *p;
  if (use_mmap) {
    p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return PyErr_NoMemory();
  } else {
    p = malloc((size_t)n);
    if (p == NULL) return PyErr_NoMemory();
  }
  memset(p, 1, (size_t)n);
  blocks[nblocks] = p;
  sizes[nblocks] = (size_t)n;
  is_mmap[nblocks] = use_mmap;
  nblocks++;
  Py_RETURN_NONE;
}

static PyObject *malloc_keep(PyObject *self, PyObject *args) { return keep(args, 0); }
static PyObject *mmap_keep(PyObject *self, PyObject *args) { return keep(args, 1); }

static PyObject *release(PyObject *self, PyObject *args) {
  for (int i = 0; i < nblocks; i++) {
    if (is_mmap[i]) munmap(blocks[i], sizes[i]);
    else free(blocks[i]);
  }
  nblocks = 0;
  Py_RETURN_NONE;
}

/* Sends this process `signo`, then blocks on a semaphore nobody posts, checking for Python
 * signal handlers only when the wait is interrupted (as multiprocessing's SemLock does). The
 * signal's C handler has already run when the wait starts: only a second, interrupting signal
 * lets a Python handler run. Unprofiled, with SIGTERM's default action, the process dies in
 * kill(). */
static PyObject *signal_then_block(PyObject *self, PyObject *args) {
  int signo;
  if (!PyArg_ParseTuple(args, "i", &signo)) return NULL;
  sem_t sem;
  if (sem_init(&sem, 0, 0) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  kill(getpid(), signo);
  int res;
  do {
    Py_BEGIN_ALLOW_THREADS
    res = sem_wait(&sem);
    Py_END_ALLOW_THREADS
  } while (res < 0 && errno == EINTR && !PyErr_CheckSignals());
  sem_destroy(&sem);
  if (res < 0) return NULL; /* the handler raised */
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"malloc_keep", malloc_keep, METH_VARARGS, "malloc n bytes, touch them, keep them"},
    {"mmap_keep", mmap_keep, METH_VARARGS, "mmap n anonymous bytes, touch them, keep them"},
    {"release", release, METH_NOARGS, "free everything kept"},
    {"signal_then_block", signal_then_block, METH_VARARGS,
     "kill(getpid(), signo), then block until a signal handler raises"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "peakline_testext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_peakline_testext(void) { return PyModule_Create(&module); }
