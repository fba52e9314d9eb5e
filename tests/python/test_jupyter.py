"""%load_ext peakline, %peakline and %%peakline in a real kernel (nbclient + ipykernel)."""

from __future__ import annotations

import json

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def _outputs_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append(output["text"])
        for value in output.get("data", {}).values():
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


def test_notebook_magics_render_the_report(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext peakline"),
        nbformat.v4.new_code_cell(
            "%%peakline -o cell.json\n"
            "import numpy as np\n"
            "big = np.ones(64 * 1024 * 1024 // 8)\n"
            "total = sum(i * i for i in range(300_000))\n"),
        nbformat.v4.new_code_cell("%peakline sum(i * i for i in range(200_000))"),
        nbformat.v4.new_code_cell("import json; p = json.load(open('cell.json'));"
                                  " print('PEAK', p['peak_bytes'], 'TOTAL', total)"),
    ]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    cell_report = _outputs_text(nb.cells[1])
    line_report = _outputs_text(nb.cells[2])
    for report in (cell_report, line_report):
        assert "peakline" in report.lower()
        assert "<" in report  # HTML (the report page, or the text report in <pre>)
    check = _outputs_text(nb.cells[3])
    profile = json.loads((tmp_path / "cell.json").read_text())
    cell_files = [name for name in profile["files"] if "ipykernel" in name or "cell" in name]
    assert cell_files, list(profile["files"])
    assert any(name in cell_report for name in cell_files)  # the cell's lines are reported
    cell_lines = {rec["lineno"] for name in cell_files
                  for rec in profile["files"][name]["lines"]}
    assert 2 in cell_lines  # `big = np.ones(...)`: 64 MB allocated there
    peak = int(check.split("PEAK")[1].split()[0])
    assert peak >= 64 * 1024 * 1024
    assert f"TOTAL {sum(i * i for i in range(300_000))}" in check
