"""The memory headlines point at user data: memory held because a module was imported is not
a leak, and OpenBLAS's work buffers are named, not charged to the line that first called BLAS
(docs/reports.md, "Memory highlights")."""

from __future__ import annotations

import pytest

from peakline_proc import PROGRAMS, line_record, marked_lines, run_peakline

MIB = 1 << 20
GROWTH = PROGRAMS / "import_growth.py"
GROWTH_MOD = PROGRAMS / "import_growth_mod.py"
LINEAR = PROGRAMS / "linearmodel.py"


@pytest.mark.parametrize("mode", ["import", "call"])
def test_memory_allocated_while_importing_is_not_a_leak(tmp_path, mode):
    # 1 MiB blocks at a 64 KiB sampling interval: every block is sampled at its size.
    result = run_peakline(["--memory-sampling-interval", "64K", str(GROWTH), mode], tmp_path,
                          timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("40\n")
    fill = line_record(result.profile(), GROWTH_MOD, marked_lines(GROWTH_MOD)["fill"])
    # The same line grows the same 40 MiB cache in the run's second half.
    assert 39 * MIB <= fill["net_bytes"] <= 41 * MIB
    flagged = "Possible leaks" in result.stdout + result.stderr
    if mode == "import":
        assert fill["import_net_bytes"] == fill["net_bytes"]
        assert fill["leak_likelihood"] == 0.0 and not flagged, result.stdout
    else:  # the control: the detector does see this growth when it is not an import
        assert "import_net_bytes" not in fill
        assert fill["leak_likelihood"] >= 0.95 and flagged, result.stdout


def test_seed_linear_model_import_lines_are_not_leaks(tmp_path):
    pytest.importorskip("sklearn")
    result = run_peakline([str(LINEAR)], tmp_path, timeout=180)
    assert result.returncode == 0, result.stderr
    profile = result.profile()
    marks = marked_lines(LINEAR)
    for name in ("import_numpy", "import_datasets", "import_linear_model"):
        record = line_record(profile, LINEAR, marks[name])
        assert record["leak_likelihood"] == 0.0, (name, record)
        assert 2 * record.get("import_net_bytes", 0) >= record["net_bytes"], (name, record)
    assert "Possible leaks" not in result.stdout + result.stderr, result.stderr
