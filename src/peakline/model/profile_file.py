"""The profile file on disk: compact JSON text in, validated Profile out, atomic writes.

The model and its validation live in profile.py (spec: docs/profile-format.md); this module
adds only the text and file layer: strict JSON parsing (no NaN/Infinity, no numbers that
overflow to infinity, no unbounded nesting), one-line ProfileFormatError for every problem,
and writes that a reader or a crash can never see half-done.
"""

from __future__ import annotations

import json
import math
import os

from peakline.model.checks import _format_error
from peakline.model.profile import Profile


def dumps_profile(profile: Profile) -> str:
    """The profile file's text: compact JSON, one trailing newline, ASCII only."""
    return json.dumps(profile.to_dict(), separators=(",", ":"), allow_nan=False) + "\n"


def loads_profile(text: str | bytes, *, source: str = "<profile>") -> Profile:
    """Parse and validate profile text; any problem is a one-line ProfileFormatError."""
    text = utf8_text(text, source=source)
    if not text.strip():
        raise _format_error(source, "", "empty file, not a profile")
    return Profile.from_dict(strict_json(text, source=source), source=source)


def utf8_text(text: str | bytes, *, source: str) -> str:
    """bytes decoded as UTF-8 (text as it is); not UTF-8: a one-line ProfileFormatError.
    Profile and sweep files are read this way."""
    if isinstance(text, bytes):
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _format_error(source, "", f"not UTF-8 text ({error.reason} at byte "
                                            f"{error.start})") from None
    return text


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes; unreadable: a one-line ProfileFormatError. Profile and sweep files
    are read this way."""
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError as error:
        raise _format_error(os.fspath(path), "",
                            f"cannot read: {error.strerror or error}") from None


def strict_json(text: str, *, source: str) -> object:
    """JSON as the profile reader accepts it (finite numbers only, bounded nesting); any
    problem is a one-line ProfileFormatError. Also reads envelopes that carry a profile."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise _format_error(source, "", "not valid JSON (nested too deeply)") from None
    except ValueError as error:  # JSONDecodeError, and int() digit limits
        raise _format_error(source, "", f"not valid JSON (truncated or corrupt): {error}") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    """Numbers like 1e999 would load as infinity and could never be written back."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:20]} is out of range")
    return number


def read_profile(path: str | os.PathLike) -> Profile:
    """Load a profile file. Unreadable, corrupt, foreign or newer files: ProfileFormatError."""
    return loads_profile(read_bytes(path), source=os.fspath(path))


def write_profile(profile: Profile, path: str | os.PathLike) -> None:
    """Write atomically: a temporary file in the same directory, fsync, then rename over
    ``path``, so a reader (or a crash mid-write) never sees half a profile."""
    write_text_atomically(dumps_profile(profile), path, encoding="ascii")


def write_text_atomically(text: str, path: str | os.PathLike, *, encoding: str) -> None:
    """A temporary file in the same directory, fsync, then rename over ``path``: a reader (or
    a crash mid-write) never sees half a file. Profile and sweep files are written this way."""
    directory = os.path.dirname(os.path.abspath(path))
    # os.open with 0o666 (not mkstemp's 0o600) so the file gets the user's umask like any other.
    tmp_path = os.path.join(directory, f".peakline-{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding=encoding) as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
