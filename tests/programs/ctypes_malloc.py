"""Calibration: memory allocated through allocators looked up at run time with dlsym, as ctypes
(and cffi's ABI mode, JITs) do (tests/python/test_memory_accuracy.py).

20 blocks of 50 MiB: 10 through ctypes.CDLL(None), 10 through ctypes.CDLL("libc.so.6"), each
filled with memset, all live together, then freed. Prints the exact bytes the blocks occupied
(malloc_usable_size, the unit peakline counts in).

usage: ctypes_malloc.py [--after-session]   (--after-session: under the peakline API, keep the
pointers looked up during a session and call them after it ended)
"""
import ctypes
import sys

N = 50 << 20


def bind(lib):
    lib.malloc.restype = ctypes.c_void_p
    lib.malloc.argtypes = [ctypes.c_size_t]
    lib.free.argtypes = [ctypes.c_void_p]
    lib.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    lib.malloc_usable_size.restype = ctypes.c_size_t
    lib.malloc_usable_size.argtypes = [ctypes.c_void_p]
    return lib


def run(main, named):
    blocks = []
    for _ in range(10):
        p = main.malloc(N)  # LINE malloc_none
        main.memset(p, 1, N)
        blocks.append((main, p))
    for _ in range(10):
        p = named.malloc(N)  # LINE malloc_libc
        named.memset(p, 2, N)
        blocks.append((named, p))
    held = sum(lib.malloc_usable_size(p) for lib, p in blocks)
    for lib, p in blocks:
        lib.free(p)  # LINE free
    return held


if sys.argv[1:] == ["--after-session"]:
    import peakline

    peakline.start()
    main, named = bind(ctypes.CDLL(None)), bind(ctypes.CDLL("libc.so.6"))
    during = run(main, named)
    peakline.stop()
    after = run(main, named)  # the hooks handed out during the session, called after it
    print("after", during == after)
else:
    print("held", run(bind(ctypes.CDLL(None)), bind(ctypes.CDLL("libc.so.6"))))
