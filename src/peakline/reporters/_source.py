"""Reading the profiled program's source for display (terminal table, HTML source view)."""

from __future__ import annotations

import linecache
import tokenize


def read_source(filename: str) -> tuple[list[str] | None, str]:
    """The file's lines decoded as Python would (PEP 263 cookie), or (None, reason).

    The file is read when the report is made, so it may have changed since the run; the
    reports say "source not available" rather than guess when it is gone.
    """
    cached = linecache.getlines(filename)  # notebook cells and other in-memory sources
    if filename.startswith("<"):
        return ([line.rstrip("\n") for line in cached], "") if cached else (None, "not a file on disk")
    try:
        with tokenize.open(filename) as stream:
            return stream.read().splitlines(), ""
    except FileNotFoundError:
        if cached:
            return [line.rstrip("\n") for line in cached], ""
        return None, "file not found"
    except (OSError, UnicodeError, ValueError, SyntaxError, LookupError) as error:
        return None, type(error).__name__
