"""Budgets that gate a run (`peakline check`, the pytest plugin) and run-vs-run comparison
(`peakline compare`); docs/gates.md.

    budgets.py   budget names, value parsing, pyproject.toml [tool.peakline.budgets]
    verdict.py   a profile judged against budgets: results, per-line evidence, text, JSON
    writers.py   the verdict as JUnit XML and Markdown (what CI shows on a pull request)
    matching.py  which lines/functions/files of two profiles are the same code
    compare.py   profiles side by side: totals, the rows that changed most (text, JSON, HTML)

All of them read profiles through the model (peakline.model), never raw JSON.
"""
