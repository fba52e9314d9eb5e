"""pyperformance docutils (render the bundled reST docs to HTML5), called directly.

Usage: python bm_docutils.py [SCALE]   (SCALE=1.0: 1 pass over the documents, about 2-3 s)
"""

import _pyperformance

if __name__ == "__main__":
    bench = _pyperformance.load("docutils")
    bench.bench_docutils(_pyperformance.iterations(1), bench.DOC_ROOT)
