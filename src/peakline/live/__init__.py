"""The live view (`peakline run --live`; docs/long-running.md, "Live view").

    source.py  ProfileSource: where the view gets "the profile so far" (a running session of
               this process, or snapshot files written by another process)
    screen.py  one Profile -> one screen (Rich renderables), per view
    app.py     the loop on the terminal: refresh, keys, quitting; LiveRun for `peakline run`

The view reads only the Profile model (peakline.model), never the core.
"""
