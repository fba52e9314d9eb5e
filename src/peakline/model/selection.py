"""Which source files a report shows: the user's code, not the interpreter's or libraries'.

The builder asks `FileSelection.is_reported(filename)` once per distinct ``co_filename``; a
sample is charged to the innermost frame whose file is reported, so time spent inside
``json.loads`` lands on the user's line that called it (see builder.py).

Rules, applied in this order (first match decides):

1. peakline's own package directory is never reported (the profiler must not show itself).
2. ``profile_exclude``: a file whose name contains any of these substrings is not reported.
3. ``profile_only``: when given, a file is reported iff its name contains one of these
   substrings. This overrides the library rule below: ``--profile-only numpy`` shows numpy.
4. ``profile_all``: everything else is reported (pseudo-files and libraries included).
5. Default, user code only. Not reported:
   * the standard library: the directory of ``os`` (and its real path), and any path with a
     ``lib/pythonX.Y/`` component (another interpreter's stdlib, e.g. a profile built from a
     venv whose base is elsewhere);
   * installed packages: ``site.getsitepackages()``, and any path containing
     ``site-packages`` or ``dist-packages``. (sysconfig would name the same directories, but
     importing it loads its build-configuration data into the profiled process, and every
     standard layout is already covered by the two path rules; a test checks sysconfig's
     directories against these rules.)
   * pseudo-files ``<...>`` (``<frozen os>``, ``<string>``, ``<built-in>``) except the ones a
     person typed: ``<stdin>``, ``<console>``, IPython ``<ipython-input-...>`` and ``<cell ...>``
     names. (ipykernel's real cell files, ``/tmp/ipykernel_*/*.py``, are ordinary user files.)

Thread-safety: the cache is a plain dict filled under the GIL; a racing duplicate computation
stores the same answer, so no lock is needed. The cache grows with the number of distinct
source files (code size), never with run time.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # no typing import while the program runs (see peakline/api.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

_PEAKLINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Pseudo-file names that hold code a person typed: reported like user files.
_USER_PSEUDO_PREFIXES = ("<stdin>", "<console>", "<ipython-input-", "<cell")

_PACKAGE_DIR_MARKERS = ("site-packages", "dist-packages")


def _dir_prefix(path: str) -> str:
    """Normalised directory path ending with a separator, for prefix tests."""
    return os.path.join(os.path.normcase(os.path.abspath(path)), "")


def has_stdlib_component(filename: str) -> bool:
    """True for "<prefix>/lib/python3.11/..." or "...\\Lib\\python3.13t\\...": a path inside
    some interpreter's stdlib (``[/\\]lib(64)?[/\\]python\\d+(\\.\\d+)?t?[/\\]``, any case;
    written out because the re module is not otherwise loaded while the program runs)."""
    s = filename.replace("\\", "/").lower()
    start = 0
    while (i := s.find("/python", start)) >= 0:
        start = i + 1
        if not (s.endswith("/lib", 0, i) or s.endswith("/lib64", 0, i)):
            continue
        k = _skip_digits(s, i + len("/python"))
        if k == i + len("/python"):
            continue  # no version digits
        if k < len(s) and s[k] == ".":
            end = _skip_digits(s, k + 1)
            if end == k + 1:
                continue  # "python3." and no minor version
            k = end
        if k < len(s) and s[k] == "t":
            k += 1
        if k < len(s) and s[k] == "/":
            return True
    return False


def _skip_digits(s: str, k: int) -> int:
    while k < len(s) and s[k].isdigit():
        k += 1
    return k


def default_library_dirs() -> tuple[str, ...]:
    """This interpreter's stdlib and package directories, as given and resolved."""
    paths = [os.path.dirname(os.path.abspath(os.__file__))]
    site = sys.modules.get("site")  # not imported under python -S: then no site directories
    getsitepackages = getattr(site, "getsitepackages", None)
    if getsitepackages is not None:
        try:
            paths.extend(getsitepackages())
        except Exception:  # noqa: BLE001 - an old virtualenv's site.py; the path rules remain
            pass
    dirs: set[str] = set()
    for path in paths:
        if path:
            dirs.add(path)
            dirs.add(os.path.realpath(path))
    return tuple(sorted(dirs))


class FileSelection:
    """Decides which files a profile reports. Immutable after construction; answers cached.

    ``library_dirs`` defaults to this interpreter's stdlib and site directories; tests pass
    their own to get answers that do not depend on where Python is installed.
    """

    __slots__ = ("profile_all", "profile_only", "profile_exclude", "_library_prefixes",
                 "_own_prefixes", "_internal_files", "_cache")

    def __init__(self, profile_all: bool = False, profile_only: Iterable[str] = (),
                 profile_exclude: Iterable[str] = (), *,
                 library_dirs: Iterable[str] | None = None,
                 internal_files: Iterable[str] = ()) -> None:
        """``internal_files``: peakline's own entry points outside its package (the
        ``peakline`` console script); never reported, whatever the other options say."""
        self.profile_all = bool(profile_all)
        # An empty substring would match every file; it is dropped rather than honoured.
        self.profile_only = tuple(s for s in profile_only if s)
        self.profile_exclude = tuple(s for s in profile_exclude if s)
        dirs = default_library_dirs() if library_dirs is None else tuple(library_dirs)
        self._library_prefixes = tuple({_dir_prefix(d) for d in dirs})
        self._own_prefixes = tuple({_dir_prefix(_PEAKLINE_DIR),
                                    _dir_prefix(os.path.realpath(_PEAKLINE_DIR))})
        self._internal_files = frozenset(os.path.abspath(f) for f in internal_files)
        self._cache: dict[str, bool] = {}

    def __repr__(self) -> str:
        return (f"FileSelection(profile_all={self.profile_all!r}, "
                f"profile_only={list(self.profile_only)!r}, "
                f"profile_exclude={list(self.profile_exclude)!r})")

    def is_reported(self, filename: str) -> bool:
        """True when samples in ``filename`` (a ``co_filename``) belong in the report."""
        answer = self._cache.get(filename)
        if answer is None:
            answer = self._decide(filename)
            self._cache[filename] = answer
        return answer

    def is_own(self, filename: str) -> bool:
        """True for peakline's own code: its package and ``internal_files`` (the console
        script, a child's generated sitecustomize)."""
        if not filename or filename.startswith("<"):
            return False
        return (self._under(filename, self._own_prefixes)
                or os.path.abspath(filename) in self._internal_files)

    def _decide(self, filename: str) -> bool:
        if not filename:
            return False
        pseudo = filename.startswith("<")
        if self.is_own(filename):
            return False
        if any(s in filename for s in self.profile_exclude):
            return False
        if self.profile_only:
            return any(s in filename for s in self.profile_only)
        if self.profile_all:
            return True
        if pseudo:
            return filename.startswith(_USER_PSEUDO_PREFIXES)
        return not self._is_library(filename)

    def _is_library(self, filename: str) -> bool:
        if any(marker in filename for marker in _PACKAGE_DIR_MARKERS):
            return True
        if has_stdlib_component(filename):
            return True
        return self._under(filename, self._library_prefixes)

    @staticmethod
    def _under(filename: str, prefixes: tuple[str, ...]) -> bool:
        try:
            candidates = {os.path.normcase(os.path.abspath(filename))}
            candidates.add(os.path.normcase(os.path.realpath(filename)))
        except (OSError, ValueError):  # embedded NUL, unencodable name: keep what we have
            candidates = {os.path.normcase(filename)}
        return any(c.startswith(p) for c in candidates for p in prefixes)
