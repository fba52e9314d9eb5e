"""Which interpreters peakline measures on, and the one-line refusal of every other.

The measuring core reads CPython's own structures (frames, thread states, code objects) with
a layout per minor version (src/native/python/frame_layout.h), so it is built only for the
CPython versions whose layout it knows: pip refuses any other interpreter first
(``requires-python`` in pyproject.toml, the check in CMakeLists.txt). This module refuses what
gets past that (an installed tree copied to another interpreter, a build forced past pip)
before the core is loaded, with the same one line.
"""

from __future__ import annotations

import sys

from peakline.errors import UnsupportedInterpreterError

OLDEST = (3, 10)
NEWEST = (3, 15)
SUPPORTED = f"CPython {OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}"

_NAMES = {"cpython": "CPython", "pypy": "PyPy", "graalpy": "GraalPy", "ironpython": "IronPython",
          "jython": "Jython"}


def unsupported_reason() -> str | None:
    """Why this interpreter cannot be profiled, in one line, or None when it can."""
    name = getattr(getattr(sys, "implementation", None), "name", "unknown")
    version = tuple(sys.version_info[:2])
    if name == "cpython" and OLDEST <= version <= NEWEST:
        return None
    shown = _NAMES.get(name, name)
    return (f"peakline supports {SUPPORTED} only; this is {shown} "
            f"{'.'.join(str(part) for part in version)} ({sys.executable})")


def check_supported() -> None:
    """UnsupportedInterpreterError unless this interpreter can be profiled."""
    reason = unsupported_reason()
    if reason is not None:
        raise UnsupportedInterpreterError(reason)
