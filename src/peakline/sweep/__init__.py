"""``peakline sweep``: the same program at several sizes, and how its memory and time grow.

    params.py      the varied names, their values, the runs they make
    runner.py      one ``peakline run`` process per run, progress, Ctrl-C
    summary.py     a run's profile (through the model) -> the figures a sweep fits
    fit.py         growth models, the choice between them, predictions
    analysis.py    runs -> fits, predictions at the target, shares per line
    sweep_file.py  the sweep file (spec: docs/sweep.md): writer and validating reader

The reports are reporters/sweep_terminal.py and reporters/sweep_html.py.
"""
