"""The Python side of the data path: raw core snapshot -> Profile -> profile file.

    selection.py  which files are the user's (FileSelection)
    builder.py    raw snapshot (docs/internals-raw-samples.md) -> Profile
    profile.py    the Profile model and its validation (spec: docs/profile-format.md)
    profile_file.py  profile text and files: strict JSON, atomic writes

Renderers and gates import from here and never touch ``peakline._core``.
"""

from peakline.model.builder import build_profile
from peakline.model.profile import (
    FORMAT_NAME,
    FORMAT_VERSION,
    CategoryTimes,
    FileRecord,
    FunctionRecord,
    LineRecord,
    Options,
    Profile,
    Sampling,
    StackSample,
    Stacks,
    ThreadRecord,
    Totals,
)
from peakline.model.profile_file import dumps_profile, loads_profile, read_profile, write_profile
from peakline.model.selection import FileSelection

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "CategoryTimes", "FileRecord", "FileSelection",
    "FunctionRecord", "LineRecord", "Options", "Profile", "Sampling", "StackSample", "Stacks",
    "ThreadRecord", "Totals", "build_profile", "dumps_profile", "loads_profile", "read_profile",
    "write_profile",
]
