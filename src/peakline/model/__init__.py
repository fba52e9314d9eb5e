"""The Python side of the data path: raw core snapshot -> Profile -> profile file.

    selection.py  which files are the user's (FileSelection)
    raw.py        the core's rows and counters, named (docs/internals-raw-samples.md)
    builder.py    raw snapshot -> Profile (with memory_builder.py, gpu_builder.py)
    schema.py     how a record declares its fields once (checks.py: the type checks)
    records.py    the records of a profile, each field declared once
    profile.py    the Profile model and its validation (spec: docs/profile-format.md)
    merge.py      profiles of several processes -> one
    profile_file.py  profile text and files: strict JSON, atomic writes

Renderers and gates import from here and never touch ``peakline._core``.
"""

# Loaded on first use (PEP 562): a session imports only selection.py while the program runs;
# the rest is imported when the profile is built, so it is not resident during the run.
_EXPORTS = {
    "build_profile": "builder",
    "FORMAT_NAME": "profile", "FORMAT_VERSION": "profile", "CategoryTimes": "profile",
    "FileRecord": "profile", "FunctionRecord": "profile", "LineRecord": "profile",
    "Options": "profile", "Profile": "profile", "Sampling": "profile",
    "StackSample": "profile", "Stacks": "profile", "ThreadRecord": "profile",
    "Totals": "profile",
    "dumps_profile": "profile_file", "loads_profile": "profile_file",
    "read_profile": "profile_file", "write_profile": "profile_file",
    "FileSelection": "selection",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'peakline.model' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"peakline.model.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "CategoryTimes", "FileRecord", "FileSelection",
    "FunctionRecord", "LineRecord", "Options", "Profile", "Sampling", "StackSample", "Stacks",
    "ThreadRecord", "Totals", "build_profile", "dumps_profile", "loads_profile", "read_profile",
    "write_profile",
]
