"""``rank_lines`` (peakline/model/rank_lines.py): each line's figures rank by rank when ranks'
profiles are merged, also by `peakline merge` of inputs that were merged already."""

from __future__ import annotations

import copy

import pytest

from peakline.model.merge import merge_profiles
from peakline.model.profile import Profile


def _rank(profile: Profile, rank: int, host: str, started_at: str, scale: float) -> Profile:
    doc = copy.deepcopy(profile.to_dict())
    doc.update(hostname=host, pid=100 + rank, started_at=started_at, rank=rank)
    for record in doc["files"].values():
        for line in record["lines"]:
            line["cpu_python_s"] *= scale
    return Profile.from_dict(doc)


def _cpu(line) -> float:
    return line.cpu_python_s + line.cpu_native_s + line.cpu_system_s


def test_each_rank_keeps_its_own_line_figures(app_profile):
    ranks = [_rank(app_profile, r, f"node-{r}", f"2024-05-01T12:00:0{r}Z", r + 1.0)
             for r in range(3)]
    first, rest = merge_profiles(ranks[:2]), ranks[2]
    for merged, n in ((first, 2), (merge_profiles([first, rest]), 3)):
        (filename, line), *_ = sorted(app_profile.lines(), key=lambda fl: -_cpu(fl[1]))
        top = merged.rank_lines[0]
        assert (top.file, top.lineno) == (filename, line.lineno)
        assert [f.rank for f in top.ranks] == list(range(n))
        for figures in top.ranks:
            scaled = line.cpu_python_s * (figures.rank + 1.0)
            assert figures.cpu_s == pytest.approx(scaled + line.cpu_native_s + line.cpu_system_s)


def test_no_rank_lines_without_two_ranks(app_profile):
    plain = [_rank(app_profile, 0, f"node-{i}", f"2024-05-01T12:00:0{i}Z", 1.0)
             for i in range(2)]
    doc = plain[1].to_dict()
    del doc["rank"]
    assert merge_profiles([plain[0], Profile.from_dict(doc)]).rank_lines is None
