"""pyperformance async_tree_memoization (leaves sleep 50 ms unless memoised (90%)), called directly.

Usage: python bm_async_tree_memoization.py [SCALE]   (SCALE=1.0: 3 run(s) of the tree, about 2-4 s)
"""

import _async_tree

if __name__ == "__main__":
    _async_tree.run("memoization", 3)
