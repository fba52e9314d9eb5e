"""The options of a profiling run, declared once for every way of starting one.

``PROFILING`` is the one list. Each surface takes its options from it:

* the command line: ``peakline run`` (cli/run.py), and through it the run options of
  ``peakline check`` and ``peakline sweep``; ``peakline attach`` (cli/attach.py);
* the Jupyter magics (``%peakline``, ``%%peakline``: the command line's spellings);
* the Python API, ``peakline.start`` / ``peakline.profile`` (``keyword``), and through it the
  pytest plugin (the ``peakline_profile`` fixture, ``@pytest.mark.peakline``) and
  ``peakline.dask``.

Each option is a cli.options.Option: its flags, how the command line's text becomes a value
(``convert``), its API keyword, and the ``check`` that every value passes after parsing,
whichever surface it came through, with one message everywhere; the surface puts the
option's name in front, as it spells it (``--cpu-sampling-rate: must be between 0.001 and 1
second, got 5.0`` on the command line and in a notebook, ``cpu_sampling_interval: ...`` from
the API). ``session_options`` turns the checked values into the session's SessionOptions.

| command line                        | API keyword                | SessionOptions field           |
|-------------------------------------|----------------------------|--------------------------------|
| ``-o``, ``--outfile PATH``          | ``outfile``                | (where the profile is written) |
| ``--cpu-sampling-rate SECONDS``     | ``cpu_sampling_interval``  | ``cpu_sampling_interval_s``    |
| ``--profile-all``                   | ``profile_all``            | ``profile_all``                |
| ``--profile-only A,B``              | ``profile_only``           | ``profile_only``               |
| ``--profile-exclude A,B``           | ``profile_exclude``        | ``profile_exclude``            |
| ``--cpu-only``                      | ``cpu_only``               | ``memory`` (its negation)      |
| ``--memory-sampling-interval 512K`` | ``memory_sampling_interval`` | ``memory_sampling_interval_bytes`` |
| ``--gpu``, ``--no-gpu``             | ``gpu``                    | ``gpu``                        |
| ``--no-children``                   | ``children``               | (whether children are tracked) |

The API's ``profile_only="lib"`` is one substring, where the command line's
``--profile-only lib,src`` is a comma-separated list; an API interval is a number (the
command line's text ``512K`` is for the command line and the magics).
"""

from __future__ import annotations

import os

from peakline.cli.options import Option, Values
from peakline.session import (
    DEFAULT_CPU_INTERVAL_S,
    DEFAULT_MEMORY_INTERVAL_BYTES,
    MEMORY_INTERVAL_RANGE_BYTES,
)

TYPE_CHECKING = False  # no typing import while the program runs (see peakline/api.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from peakline.session import SessionOptions

# The CPU sampling interval a session accepts, in seconds (both ends included).
CPU_INTERVAL_RANGE_S = (0.001, 1.0)


# ---- checks: a value as any surface gives it -> the value the session takes ---------------

def cpu_sampling_interval(value: object) -> float:
    low, high = CPU_INTERVAL_RANGE_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not low <= value <= high:
        raise ValueError(f"must be between {low:g} and {high:g} second, got {value!r}")
    return float(value)


def memory_sampling_interval(value: object) -> int:
    """A whole number of bytes from 1K to 1T; the messages are those of the command line's
    byte sizes (reporters/_format.py, parse_byte_size), which reads the same range."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number of bytes, got {value!r}")
    return parse_memory_sampling_interval(str(value))


def parse_memory_sampling_interval(text: str) -> int:
    """The command line's text: a byte size from 1K to 1T (``512K``, ``1M``, ``65536``)."""
    from peakline.reporters._format import parse_byte_size

    low, high = MEMORY_INTERVAL_RANGE_BYTES
    return parse_byte_size(text, minimum=low, maximum=high)


def substrings(value: object) -> tuple[str, ...]:
    """The API's file filters: one substring, or an iterable of them."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, os.PathLike):
        return (os.fspath(value),)
    try:
        return tuple(str(v) for v in (value or ()))
    except TypeError:
        raise ValueError(f"must be a substring or a list of substrings, got {value!r}") from None


def comma_separated(text: str) -> tuple[str, ...]:
    """The command line's file filters: ``A,B`` (blanks around a comma ignored)."""
    return tuple(v.strip() for v in text.split(",") if v.strip())


def outfile(value: object) -> str | None:
    return os.fspath(value) if value else None


def gpu(value: object) -> bool | None:
    """None: on when a device is found; True: on (a warning when nothing is measured)."""
    return None if value is None else bool(value)


# ---- the declaration -----------------------------------------------------------------------

PROFILING = [
    Option("-o", "--outfile", dest="outfile", keyword="outfile", check=outfile, metavar="PATH",
           help="where to write the profile (default: peakline-<script>.json in the current "
                "directory)"),
    Option("--cpu-sampling-rate", dest="cpu_sampling_rate", keyword="cpu_sampling_interval",
           convert=float, check=cpu_sampling_interval, default=DEFAULT_CPU_INTERVAL_S,
           metavar="SECONDS",
           help="CPU sampling interval in seconds of each thread's CPU time, from 0.001 to 1 "
                f"(default: {DEFAULT_CPU_INTERVAL_S})"),
    Option("--profile-all", dest="profile_all", keyword="profile_all", convert=None,
           const=True, default=False, check=bool,
           help="report every file, libraries and the standard library included"),
    Option("--profile-only", dest="profile_only", keyword="profile_only",
           convert=comma_separated, check=substrings, default=(), metavar="A,B",
           help="report only files whose path contains one of these substrings"),
    Option("--profile-exclude", dest="profile_exclude", keyword="profile_exclude",
           convert=comma_separated, check=substrings, default=(), metavar="A,B",
           help="do not report files whose path contains one of these substrings"),
    Option("--cpu-only", dest="cpu_only", keyword="cpu_only", convert=None, const=True,
           default=False, check=bool,
           help="profile CPU time only: no allocation hooks, no memory or copy columns"),
    Option("--memory-sampling-interval", dest="memory_sampling_interval",
           keyword="memory_sampling_interval", convert=parse_memory_sampling_interval,
           check=memory_sampling_interval, default=DEFAULT_MEMORY_INTERVAL_BYTES,
           metavar="BYTES",
           help="mean number of allocated bytes between two memory samples, from 1K to 1T "
                "(accepts K, M, G, T suffixes; default: 512K). Smaller is more precise per "
                "line and slower; allocations much larger than this are attributed exactly "
                "either way"),
    Option("--gpu", dest="gpu", keyword="gpu", convert=None, const=True, check=gpu,
           help="profile the NVIDIA GPU through NVML (default: on when a device is found)"),
    Option("--no-gpu", dest="gpu", convert=None, const=False, help="do not profile the GPU"),
    Option("--no-children", dest="children", keyword="children", convert=None, const=False,
           default=True, check=bool,
           help="do not profile the Python processes the program starts (by default they are "
                "profiled and merged into this report)"),
]

BY_KEYWORD = {o.keyword: o for o in PROFILING if o.keyword is not None}


def cli_options(*dests: str) -> list[Option]:
    """The declared options with these dests (every one when none is named), in the
    declaration's order: what a command or the magics read."""
    return [o for o in PROFILING if not dests or o.dest in dests]


def checked(values: Values, name: Callable[[Option], str],
            options: Iterable[Option] = PROFILING) -> Values:
    """Runs every option's check on ``values`` (parsed options, by dest), in place.
    ValueError ``"NAME: message"``, NAME being ``name(option)``: how the surface spells it."""
    for option in options:
        if option.check is None or not hasattr(values, option.dest):
            continue
        try:
            setattr(values, option.dest, option.check(getattr(values, option.dest)))
        except ValueError as error:
            raise ValueError(f"{name(option)}: {error}") from None
    return values


def flag_name(option: Option) -> str:
    """An option's name on the command line and in the magics (its long flag)."""
    return option.flags[-1]


def check_command_line(values: Values, options: Iterable[Option] = PROFILING) -> Values:
    """``checked`` for a command line: UsageError (exit status 2) naming the flag."""
    from peakline.errors import UsageError

    try:
        return checked(values, flag_name, options)
    except ValueError as error:
        raise UsageError(str(error)) from None


def from_keywords(keywords: Mapping[str, object]) -> Values:
    """The API's keywords (``BY_KEYWORD``) as checked values by dest, defaults for the rest.
    ValueError naming the keyword; TypeError for a keyword that is not an option."""
    defaults: dict[str, object] = {}
    for option in PROFILING:
        defaults.setdefault(option.dest, option.default)
    values = Values(**defaults)
    for keyword, value in keywords.items():
        option = BY_KEYWORD.get(keyword)
        if option is None:
            raise TypeError(f"unexpected keyword argument {keyword!r} (profiling options: "
                            f"{', '.join(BY_KEYWORD)})")
        setattr(values, option.dest, value)
    return checked(values, lambda o: o.keyword or o.dest)


def session_options(values: Values, *, internal_files: tuple[str, ...] = ()) -> SessionOptions:
    """What the session measures, from checked values."""
    from peakline.session import SessionOptions

    return SessionOptions(
        cpu_sampling_interval_s=values.cpu_sampling_rate,
        profile_all=values.profile_all,
        profile_only=tuple(values.profile_only),
        profile_exclude=tuple(values.profile_exclude),
        internal_files=internal_files,
        memory=not values.cpu_only,
        memory_sampling_interval_bytes=values.memory_sampling_interval,
        gpu=values.gpu,
    )
