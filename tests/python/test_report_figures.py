"""Figures that need a sentence, and run delay as its own category, in the terminal report and
`peakline compare` (synthetic profiles; the HTML side is in test_html_polish.py)."""

from __future__ import annotations

import io

from synthetic_memory import with_memory

from peakline.gates import compare
from peakline.reporters import terminal

MS = 1_000_000


def render(profile, width=100) -> str:
    stream = io.StringIO()
    terminal.render(profile, stream, width=width, color=False)
    return stream.getvalue()


def contended(build, app_source, run_delay_ms=900):
    frames = [(app_source, "<module>", 1, 12), (app_source, "work", 2, 3)]
    return build(frames, [(1, (1, 0), 300 * MS, 0, 0, 20 * MS, 30, 2, run_delay_ms * MS)],
                 threads=[(1, True, 300 * MS, 20 * MS, run_delay_ms * MS)])


def test_header_and_file_line_say_run_delay_apart_from_wait(build, app_source):
    text = render(contended(build, app_source))
    assert "wait 20.0 ms · run delay 900.0 ms" in text
    assert "CPU 24.6%, wait 20.0 ms, run delay 900.0 ms" in text  # the file's line: 300/1220


def test_no_run_delay_no_mention(app_profile):
    assert "run delay" not in render(app_profile)


def test_cgroup_throttling_is_shown_when_the_quota_bit(build, app_source, make_meta):
    frames = [(app_source, "work", 2, 3)]
    throttled = build(frames, [(1, (0,), 5 * MS, 0, 0, 0, 5, 0)],
                      meta=make_meta(cgroup_throttling=(1.2, 34)))
    assert "cgroup CPU quota throttled 1.20 s (34 periods)" in render(throttled)
    idle = build(frames, [(1, (0,), 5 * MS, 0, 0, 0, 5, 0)],
                 meta=make_meta(cgroup_throttling=(0.0, 0)))
    assert "throttled" not in render(idle)


def test_peak_above_peak_rss_gets_its_sentence(app_profile):
    profile = with_memory(app_profile)  # peak 590.5 MiB, peak RSS 700 MiB: nothing to explain
    assert "pages never touched" not in render(profile)
    profile.peak_rss_bytes = 100 << 20
    text = render(profile, width=80)
    assert "peak counts bytes allocated, with pages never touched (np.empty)" in text
    assert "peak RSS counts only the pages the kernel backed" in text
    assert all(len(row) <= 80 for row in text.splitlines())


def test_truncated_stacks_warning_says_the_users_line_is_kept(app_profile):
    app_profile.sampling.truncated_stacks = 4
    text = render(app_profile, width=80)
    assert "4 truncated stacks" in text
    assert "the innermost frames and the root (where your line is) are kept" in text


def test_compare_shows_wait_and_run_delay_totals(build, app_source):
    quiet = contended(build, app_source, run_delay_ms=0)
    busy = contended(build, app_source, run_delay_ms=900)
    comp = compare.compare([quiet, busy], ["quiet.json", "busy.json"])
    text = compare.render_text(comp)
    rows = [r.strip() for r in text.splitlines()]
    row = next(r for r in rows if r.startswith("run delay"))
    assert "0.000 s" in row and "0.900 s" in row and "+0.900 s (new)" in row, row
    assert any(r.startswith("wait") and "0.020 s" in r for r in rows)
    runs = comp.to_dict()["runs"]
    assert (runs[0]["run_delay_s"], runs[1]["run_delay_s"]) == (0.0, 0.9)
    both_quiet = compare.render_text(compare.compare([quiet, quiet], ["a.json", "b.json"]))
    assert "run delay" not in both_quiet
