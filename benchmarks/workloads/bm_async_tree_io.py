"""pyperformance async_tree_io (every leaf awaits a 50 ms sleep (mostly waiting)), called directly.

Usage: python bm_async_tree_io.py [SCALE]   (SCALE=1.0: 1 run(s) of the tree, about 2-4 s)
"""

import _async_tree

if __name__ == "__main__":
    _async_tree.run("io", 1)
