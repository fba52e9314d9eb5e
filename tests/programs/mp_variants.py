"""Process, ProcessPoolExecutor and a sys.executable subprocess; exit codes must survive."""
import concurrent.futures
import multiprocessing as mp
import os
import subprocess
import sys


def work(n):
    total = 0
    for i in range(n):  # LINE worker_loop
        total += i * i
    return total


def child_exit(code):
    work(200_000)
    sys.exit(code)


def main():
    method = sys.argv[1] if len(sys.argv) > 1 else "fork"
    ctx = mp.get_context(method)
    p = ctx.Process(target=child_exit, args=(3,))
    p.start()
    p.join()
    print("process exitcode", p.exitcode, flush=True)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        print("executor", sum(ex.map(work, [300_000] * 2)) % 1000003, flush=True)
    r = subprocess.run([sys.executable, "-c", "import sys; sum(i*i for i in range(300000)); sys.exit(5)"])
    print("subprocess", r.returncode, flush=True)
    pid = os.fork()
    if pid == 0:
        work(200_000)
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    print("fork", os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
