"""One exception hierarchy for peakline. CLI errors carry their exit status."""


class PeaklineError(Exception):
    """Base of every error peakline raises on purpose; its message is one line for users."""

    exit_code = 2


class UsageError(PeaklineError):
    """Bad command line: unknown option, missing script, bad value."""

    exit_code = 2


class ProfileFormatError(PeaklineError):
    """A profile file that is truncated, corrupt, foreign or from a newer version."""

    exit_code = 3


class ProfilerStateError(PeaklineError):
    """start() while already profiling, stop() while not, or the core failed to start."""

    exit_code = 4


class UnsupportedInterpreterError(ProfilerStateError):
    """An interpreter the measuring core does not know (anything but CPython 3.10-3.15)."""
