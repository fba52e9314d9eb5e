"""A fork Pool ended by terminate() (what `with Pool(...)` does): its workers get SIGTERM."""
import multiprocessing

if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    for _ in range(3):
        pool = ctx.Pool(2)
        with pool:
            print(sum(pool.map(abs, range(-10, 10))))
        pool.join()
    for _ in range(20):  # terminated at once, workers maybe still starting
        pool = ctx.Pool(1)
        with pool:
            pass
        pool.join()
    print("done")
