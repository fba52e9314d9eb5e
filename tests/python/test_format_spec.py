"""docs/profile-format.md, the spec, against the model's one declaration of every profile field
(peakline.model.records, peakline.model.profile) and against what a real run writes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from peakline.model import profile as profile_module
from peakline.model import records
from peakline.model.profile import Profile
from peakline.model.schema import all_field_names, field_names, is_record
from peakline_proc import run_peakline

DOC = Path(__file__).resolve().parents[2] / "docs" / "profile-format.md"

# Where the spec describes each record's fields (a section runs to the next heading).
SECTIONS = {
    records.Options: ["### `options`"],
    records.Sampling: ["### `sampling`"],
    records.Totals: ["### `totals`"],
    records.ThreadRecord: ["### `threads[]`"],
    records.FileRecord: ["### `files`"],
    records.LineRecord: ["### `files`", "### Memory", "### Phases and processes", "### GPU"],
    records.FunctionRecord: ["### `files`", "### Memory", "### Phases and processes"],
    records.Stacks: ["### `stacks`"],
    records.StackSample: ["### `stacks`", "### Memory"],
    records.Memory: ["### Memory"],
    records.Gpu: ["### GPU"],
    records.PhaseRecord: ["### Phases and processes"],
    records.ProcessRecord: ["### Phases and processes"],
    records.TaskKeyRecord: ["### Phases and processes"],
    records.RankLineRecord: ["### Phases and processes"],
    records.RankFigures: ["### Phases and processes"],
    records.SnapshotInfo: ["### Snapshot"],
    Profile: ["## Top-level object", "### Memory", "### Phases and processes",
              "### Attached", "### Activity and submitted work", "### Snapshot", "### GPU"],
}
# The run-wide objects the model keeps as plain dicts, and the file's header.
OBJECTS = {
    "### Activity and submitted work": (profile_module.ACTIVITY_FIELDS
                                        + profile_module.SUBMITTED_WORK_FIELDS
                                        + profile_module.SUBMITTED_LINE_FIELDS),
    "### Attached": profile_module.ATTACHED_FIELDS,
    "## Top-level object": profile_module.HEADER_FIELDS,
}


def _code_names(text: str) -> set[str]:
    """Every name written in a `code span`."""
    return {name for span in re.findall(r"`([^`\n]+)`", text)
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}


def _section(text: str, heading: str) -> str:
    """From the line that starts with ``heading`` to the next heading of level 2 or 3."""
    start = re.search(rf"^{re.escape(heading)}[ \n]", text, re.M).start()
    body = text.index("\n", start)
    end = re.search(r"^#{2,3} ", text[body:], re.M)
    return text[start:body + end.start()] if end else text[start:]


def test_every_declared_field_is_specified_where_its_record_is():
    text = DOC.read_text()
    for record, headings in SECTIONS.items():
        named = set().union(*(_code_names(_section(text, h)) for h in headings))
        missing = [name for name in field_names(record) if name not in named]
        assert not missing, f"{record.__name__}: {missing} not in {headings}"
    for heading, names in OBJECTS.items():
        missing = [name for name in names if name not in _code_names(_section(text, heading))]
        assert not missing, f"{heading}: {missing}"


def test_every_field_the_spec_tables_list_is_declared():
    declared = {name for record in SECTIONS for name in field_names(record)}
    declared.update(name for names in OBJECTS.values() for name in names)
    cells = re.findall(r"^\| ([^|]*`[^|]*) \|", DOC.read_text(), re.M)
    listed = {name for cell in cells for span in re.findall(r"`([^`]+)`", cell)
              if "*" not in span for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}
    assert listed - declared == set()


PROGRAM = textwrap.dedent("""\
    import multiprocessing, threading, time
    import peakline

    def work(n):
        return sum(i * i for i in range(n))

    def main():
        kept = []
        with peakline.phase("grow"):
            for _ in range(40):
                kept.append(bytearray(250_000))
                work(20_000)
        worker = threading.Thread(target=work, args=(400_000,))
        worker.start()
        worker.join()
        with multiprocessing.get_context("fork").Pool(2) as pool:
            print(sum(pool.map(work, [300_000] * 4)))
        time.sleep(0.05)
        return len(kept)

    if __name__ == "__main__":
        main()
""")


def _keys(value, path: str = "") -> set[tuple[str, str]]:
    """(key, where) of every object key in a decoded profile, file names left out."""
    out = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if path != ".files":
                out.add((key, path))
            out |= _keys(item, f"{path}.{key}" if path != ".files" else f"{path}[]")
    elif isinstance(value, list):
        for item in value:
            out |= _keys(item, f"{path}[]")
    return out


def _unknown(record, where: str = "") -> list[str]:
    """The fields a reader kept in ``extra`` (not declared), anywhere in the model."""
    out = [f"{where}.{key}" for key in getattr(record, "extra", None) or ()]
    for name in all_field_names(type(record)):
        value = getattr(record, name)
        values = value.values() if isinstance(value, dict) else (
            value if isinstance(value, list) else [value])
        for v in values:
            if is_record(v):
                out += _unknown(v, f"{where}.{name}")
    return out


@pytest.fixture(scope="module")
def real_profile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spec")
    (tmp / "spec_program.py").write_text(PROGRAM)
    result = run_peakline(["spec_program.py"], tmp)
    assert result.returncode == 0, result.stderr
    return result.profile()


def test_every_field_of_a_real_profile_is_in_the_spec(real_profile):
    assert {"processes", "phases", "memory", "activity"} <= set(real_profile)  # what it covers
    named = _code_names(DOC.read_text())
    missing = sorted({f"{where}.{key}" for key, where in _keys(real_profile) if key not in named})
    assert not missing


def test_every_field_of_a_real_profile_is_declared(real_profile):
    assert _unknown(Profile.from_dict(real_profile)) == []
