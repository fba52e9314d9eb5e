"""Reading the profiled program's source for display (terminal table, HTML source view)."""

from __future__ import annotations

import tokenize


def read_source(filename: str) -> tuple[list[str] | None, str]:
    """The file's lines decoded as Python would (PEP 263 cookie), or (None, reason).

    The file is read when the report is made, so it may have changed since the run; the
    reports say "source not available" rather than guess when it is gone.
    """
    if filename.startswith("<"):
        return None, "not a file on disk"
    try:
        with tokenize.open(filename) as stream:
            return stream.read().splitlines(), ""
    except FileNotFoundError:
        return None, "file not found"
    except (OSError, UnicodeError, ValueError, SyntaxError, LookupError) as error:
        return None, type(error).__name__
