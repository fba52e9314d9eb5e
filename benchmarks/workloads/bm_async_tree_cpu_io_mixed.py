"""pyperformance async_tree_cpu_io_mixed (half the leaves factorial(500), half memoised 50 ms sleeps), called directly.

Usage: python bm_async_tree_cpu_io_mixed.py [SCALE]   (SCALE=1.0: 2 run(s) of the tree, about 2-4 s)
"""

import _async_tree

if __name__ == "__main__":
    _async_tree.run("cpu_io_mixed", 2)
