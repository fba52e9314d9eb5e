"""Which rows of two profiles are the same code: lines, functions, files, phases.

Files are matched by path, else by the longest unique common path tail (two checkouts of one
repository in different folders). Lines are matched by line number when the file's source did
not change between the runs; when both versions of the source can be read (the runs were made
from different folders) and differ, lines are matched by their text (difflib's matching
blocks), so code moved by an edit above it still matches. When only one version is on disk
(the same path, rewritten), lines are matched by their function and their offset from the
function's first line, which follows a function moved by an edit above it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

from peakline.model.profile import LineRecord, Profile
from peakline.reporters._source import read_source


def match_files(old: Iterable[str], new: Iterable[str]) -> dict[str, str]:
    """new file -> old file."""
    old = list(old)
    out: dict[str, str] = {}
    old_set = set(old)
    for name in new:
        if name in old_set:
            out[name] = name
            continue
        best, best_len, tie = None, 0, False
        parts = _parts(name)
        for candidate in old:
            common = 0
            for a, b in zip(reversed(parts), reversed(_parts(candidate))):
                if a != b:
                    break
                common += 1
            if common > best_len:
                best, best_len, tie = candidate, common, False
            elif common == best_len and common:
                tie = True
        if best is not None and not tie:
            out[name] = best
    return out


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p]


def _function_starts(profile: Profile, filename: str) -> list[tuple[int, str]]:
    record = profile.files.get(filename)
    return sorted((f.lineno, f.name) for f in record.functions) if record else []


def _enclosing(starts: list[tuple[int, str]], lineno: int) -> tuple[int, str] | None:
    found = None
    for first, name in starts:
        if first > lineno:
            break
        found = (first, name)
    return found


def match_lines(old: Profile, new: Profile) -> dict[tuple[str, int], tuple[str, int]]:
    """(new file, new lineno) -> (old file, old lineno), for every line of ``new`` that has a
    counterpart in ``old``."""
    files = match_files(old.files, new.files)
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for new_file, old_file in files.items():
        old_lines = {line.lineno for line in old.files[old_file].lines}
        new_linenos = [line.lineno for line in new.files[new_file].lines]
        mapping = _line_map(old, new, old_file, new_file, new_linenos)
        for lineno in new_linenos:
            target = mapping.get(lineno)
            if target is not None and target in old_lines:
                out[(new_file, lineno)] = (old_file, target)
    return out


def _line_map(old: Profile, new: Profile, old_file: str, new_file: str,
              linenos: list[int]) -> dict[int, int]:
    if old_file != new_file:
        old_src, _ = read_source(old_file)
        new_src, _ = read_source(new_file)
        if old_src is not None and new_src is not None:
            if old_src == new_src:
                return {n: n for n in linenos}
            return _by_text(old_src, new_src)
    old_starts = _function_starts(old, old_file)
    new_starts = _function_starts(new, new_file)
    if old_starts == new_starts:
        return {n: n for n in linenos}
    old_by_name: dict[str, int | None] = {}
    for first, name in old_starts:
        old_by_name[name] = None if name in old_by_name else first  # ambiguous: None
    out = {}
    for lineno in linenos:
        enclosing = _enclosing(new_starts, lineno)
        if enclosing is None:
            out[lineno] = lineno
            continue
        first, name = enclosing
        old_first = old_by_name.get(name)
        if old_first is not None:
            out[lineno] = old_first + (lineno - first)
    return out


def _by_text(old_src: list[str], new_src: list[str]) -> dict[int, int]:
    """new lineno -> old lineno for lines whose text is unchanged (1-based)."""
    matcher = difflib.SequenceMatcher(None, old_src, new_src, autojunk=False)
    out = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.b + k + 1] = block.a + k + 1
    return out


def line_source(filename: str, lineno: int) -> str:
    lines, _ = read_source(filename)
    if lines is None or not 1 <= lineno <= len(lines):
        return ""
    return lines[lineno - 1].strip()


def short_path(filename: str) -> str:
    """The path relative to the current directory when it is below it, else as given."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def line_label(filename: str, line: LineRecord | int) -> str:
    lineno = line if isinstance(line, int) else line.lineno
    return f"{short_path(filename)}:{lineno}"
