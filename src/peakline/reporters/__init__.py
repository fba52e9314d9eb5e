"""Renderers: each module turns a ``peakline.model.Profile`` into one output format.

Every reporter exposes ``render(profile, stream, **options) -> None`` and reads only the
Profile model (never ``peakline._core``), so it works the same on a live run and on a profile
file read back later.

    terminal.py     the line table for humans (Scalene-like)
    json_report.py  the profile file format itself
"""
