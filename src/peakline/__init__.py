"""peakline: line-level CPU and memory profiler for Python with a C++ measuring core.

    import peakline
    with peakline.profile(outfile="run.json") as p:   # or peakline.start() / peakline.stop()
        with peakline.phase("fit"):
            model.fit(X, y)

In Jupyter: ``%load_ext peakline``, then ``%peakline statement`` or a ``%%peakline`` cell.
See docs/api.md.
"""

__version__ = "0.1.0"

from peakline.api import is_profiling, phase, profile, start, stop  # noqa: E402

__all__ = ["__version__", "is_profiling", "load_ipython_extension", "phase", "profile",
           "start", "stop"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext peakline``: registers the ``%peakline`` / ``%%peakline`` magics."""
    from peakline.jupyter import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:  # noqa: ARG001 - IPython's hook signature
    pass
