"""pyperformance async_tree (no real work at the leaves: asyncio.gather overhead, 6 levels x 6 branches), called directly.

Usage: python bm_async_tree.py [SCALE]   (SCALE=1.0: 3 run(s) of the tree, about 2-4 s)
"""

import _async_tree

if __name__ == "__main__":
    _async_tree.run("none", 3)
