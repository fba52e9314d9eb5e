"""Two fork children that hold known amounts: 50 MiB and 100 MiB, one after the other
(argv[1] == "apart") or both at once ("together"). The parent itself holds almost nothing.

Truth for a merged profile: each child's own peak is its block (50 / 100 MiB plus a little);
the process tree's peak is 100 MiB apart and 150 MiB together; at the tree's peak the 100 MiB
line holds 100 MiB and the 50 MiB line 0 (apart) or 50 MiB (together).
"""
import multiprocessing as mp
import sys
import time

MIB = 1 << 20
HOLD_S = 0.4  # several aggregator ticks, so every timeline sees the block


def hold_50(ready, release):
    block = bytearray(50 * MIB)  # LINE hold_50
    ready.set()
    release.wait(60)
    return len(block)


def hold_100(ready, release):
    block = bytearray(100 * MIB)  # LINE hold_100
    ready.set()
    release.wait(60)
    return len(block)


def run(targets):
    ctx = mp.get_context("fork")
    release = ctx.Event()
    started = []
    for target in targets:
        ready = ctx.Event()
        process = ctx.Process(target=target, args=(ready, release))
        process.start()
        started.append((process, ready))
    for _, ready in started:
        ready.wait(60)
    time.sleep(HOLD_S)
    release.set()
    for process, _ in started:
        process.join(60)
        assert process.exitcode == 0, process.exitcode


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "apart"
    if mode == "together":
        run([hold_50, hold_100])
    else:
        run([hold_50])
        time.sleep(HOLD_S)
        run([hold_100])
    print("done", mode)


if __name__ == "__main__":
    main()
