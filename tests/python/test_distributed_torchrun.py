"""torchrun with 2 ranks (gloo, CPU): each rank is profiled as a child of the launcher and
merged with its rank; the report names the slowest rank and the largest peak
(docs/distributed.md). torch is not in the test extra (its PyPI wheel brings CUDA
libraries): the test runs where torch is installed."""

from __future__ import annotations

import io
import re
import socket

import pytest

from peakline.model.profile import Profile
from peakline.reporters import html, terminal
from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline

RANKS = PROGRAMS / "torch_ranks.py"
MIB = 1 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_ranks_are_merged_with_their_rank_and_the_slowest_is_named(tmp_path):
    pytest.importorskip("torch.distributed")
    args = ["--no-report", "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(RANKS)]
    result = run_peakline(args, tmp_path, timeout=240, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    truth = float(re.search(r"ranks cpu_s ([0-9.]+)", result.stdout).group(1))
    doc = result.profile()
    ranks = sorted((p for p in doc["processes"] if p.get("rank") is not None),
                   key=lambda p: p["rank"])
    assert [p["rank"] for p in ranks] == [0, 1] and all(p["merged"] for p in ranks), \
        doc["processes"]
    assert all(p["hostname"] == doc["hostname"] for p in ranks)
    # Each rank's own peak holds its tensor: 25 and 50 MiB, plus torch's own ~(5-40) MiB.
    assert ranks[1]["peak_bytes"] - ranks[0]["peak_bytes"] >= 20 * MIB, ranks
    marks = marked_lines(RANKS)
    hold = line_record(doc, RANKS, marks["hold"])
    assert 74 * MIB <= hold["live_at_peak_bytes"] <= 76 * MIB, hold
    burnt = cpu_s(line_record(doc, RANKS, marks["burn_loop"])) + \
        cpu_s(line_record(doc, RANKS, marks["burn_body"]))
    # Measured: 0.596 of 0.600 s (2 cores, load ~6).
    assert 0.75 * truth <= burnt <= 1.15 * truth, (burnt, truth)

    # Per rank, per line: each rank's own CPU on the burn lines and its own tensor on the
    # hold line, against what each rank measured.
    own = {int(r): (float(c), int(h)) for r, c, h in
           re.findall(r"^rank (\d) cpu_s ([0-9.]+) held (\d+)$", result.stdout, re.M)}
    assert sorted(own) == [0, 1], result.stdout
    per_line = {(r["file"], r["lineno"]): {x["rank"]: x for x in r["ranks"]}
                for r in doc["rank_lines"]}
    held = per_line[(str(RANKS), marks["hold"])]
    burn = [per_line.get((str(RANKS), marks[m]), {}) for m in ("burn_loop", "burn_body")]
    for rank, (spent, nbytes) in own.items():
        assert nbytes - MIB <= held[rank]["live_at_peak_bytes"] <= nbytes + MIB, held
        burnt = sum(b[rank]["cpu_s"] for b in burn if rank in b)
        assert 0.7 * spent <= burnt <= 1.2 * spent + 0.05, (rank, burnt, spent)

    profile = Profile.from_dict(doc)
    out = io.StringIO()
    terminal.render(profile, out, width=160, color=False)
    text = out.getvalue()
    pid1 = ranks[1]["pid"]
    assert re.search(rf"slowest rank: rank 1 \(pid {pid1}\) [0-9.]+ s CPU", text), text
    assert f"largest peak: rank 1 (pid {pid1})" in text, text
    assert "Lines per rank" in text, text
    assert re.search(r"rank 0 CPU [0-9.]+ m?s held 25\.0 MiB . rank 1 CPU [0-9.]+ m?s held "
                     r"50\.0 MiB", text), text
    page = io.StringIO()
    html.render(profile, page)
    assert re.search(rf'"rankHighlights": ?\[\["slowest rank", ?"rank 1 \(pid {pid1}\)"',
                     page.getvalue())
    assert '<section id="processes"' in page.getvalue()
    assert '"rank_lines":[' in page.getvalue()
