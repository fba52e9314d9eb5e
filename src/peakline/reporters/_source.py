"""Reading the profiled program's source for display (terminal table, HTML source view)."""

from __future__ import annotations

import contextlib
import linecache
import tokenize
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

# Set by ``sources_from``: the only source text there is (a server rendering a pushed profile
# never opens the paths it names).
_GIVEN_SOURCES: ContextVar[Mapping[str, str] | None] = ContextVar("peakline_given_sources",
                                                                  default=None)


@contextlib.contextmanager
def sources_from(sources: Mapping[str, str]) -> Iterator[None]:
    """Within this block, source is read from ``sources`` (file name -> text) and never from
    the file system or linecache."""
    token = _GIVEN_SOURCES.set(sources)
    try:
        yield
    finally:
        _GIVEN_SOURCES.reset(token)


def read_source(filename: str) -> tuple[list[str] | None, str]:
    """The file's lines decoded as Python would (PEP 263 cookie), or (None, reason).

    The file is read when the report is made, so it may have changed since the run; the
    reports say "source not available" rather than guess when it is gone.
    """
    given = _GIVEN_SOURCES.get()
    if given is not None:
        text = given.get(filename)
        return (text.splitlines(), "") if isinstance(text, str) else (None, "source not sent")
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
