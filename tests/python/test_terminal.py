"""Terminal reporter against synthetic profiles (see conftest.app_profile for the numbers)."""

from __future__ import annotations

import io
import re

import pytest

from peakline.reporters import terminal

MS = 1_000_000
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def render(profile, **options) -> str:
    stream = io.StringIO()
    options.setdefault("width", 100)
    options.setdefault("color", False)
    terminal.render(profile, stream, **options)
    return stream.getvalue()


def row_for(text: str, marker: str) -> str:
    rows = [r for r in text.splitlines() if marker in r]
    assert len(rows) == 1, (marker, text)
    return rows[0]


def test_header_summarises_the_run(app_profile):
    text = render(app_profile)
    assert "app.py --fast" in text.splitlines()[0]
    assert "elapsed 2.50 s" in text and "exit code 0" in text
    # CPU 0.925 s: Python 605/925 = 65%, native 320/925 = 35%; wait 0.5 s
    assert "CPU 925.0 ms: Python 65%" in text and "native 35%" in text
    assert "wait 500.0 ms" in text
    assert "98.6% of sampled time attributed to reported code" in text  # 1 - 20/1425
    assert "143 samples (93 CPU, 50 wait)" in text
    assert "dropped 7 samples (4.7%)" in text
    assert "1 thread: MainThread 925.0 ms CPU" in text


def test_hot_line_shows_its_source_and_percentages(app_profile):
    text = render(app_profile)
    hot = row_for(text, "# HOT")
    assert hot.split()[0] == "3"
    assert "42.1%" in hot  # 600 ms of 1425 ms sampled, Python column
    native = row_for(text, "# NATIVE")
    assert "21.1%" in native  # json time charged to line 5, native column
    wait = row_for(text, "# WAIT")
    assert "0.50s" in wait  # wait shown in seconds
    assert "% of sampled time" in text and "Python" in text and "native" in text


def test_functions_summary_shows_self_and_inclusive(app_profile):
    text = render(app_profile)
    assert "self" in text and "inclusive" in text
    work = row_for(text, "work (line 2)")
    assert work.count("63.2%") == 2  # (600 + 300) / 1425, self == inclusive
    main = row_for(text, "main (line 8)")
    assert "35.4%" in main and "98.6%" in main  # self 505 ms, inclusive 1405 ms


def test_full_mode_shows_every_source_line(app_profile):
    text = render(app_profile)
    assert "# COLD" in text
    assert "def main():" in text  # a line without samples


def test_reduced_mode_hides_cold_lines_with_gaps(app_profile):
    text = render(app_profile, reduced=True)
    assert "# HOT" in text and "# NATIVE" in text and "# WAIT" in text
    assert "# COLD" not in text  # 5 ms = 0.35% < 1%
    assert "def main():" not in text
    gaps = [r for r in text.splitlines() if r.strip().startswith("...")]
    assert len(gaps) == 2  # between 3 and 5, and between 5 and 9
    shown = render(app_profile, reduced=True, cpu_percent_threshold=0.1)
    assert "# COLD" in shown
    assert "<module> (line 1)" in render(app_profile, reduced=True)


def test_reduced_mode_hides_functions_and_files_below_threshold(build, app_source):
    frames = [(app_source, "work", 2, 3), ("/home/u/tiny.py", "tiny", 1, 1)]
    profile = build(frames, [(1, (0,), 990 * MS, 0, 0, 0, 99, 0),
                             (1, (1,), 1 * MS, 0, 0, 0, 1, 0)])
    text = render(profile, reduced=True)
    assert "/home/u/tiny.py" not in text
    assert "1 file(s) below 1% hidden" in text
    assert "/home/u/tiny.py" in render(profile)


@pytest.mark.parametrize("width", [60, 63, 100, 160])
def test_every_row_fits_the_width(build, app_source, width):
    with open(app_source, "a") as stream:
        stream.write("x = '" + "long " * 60 + "'  # LONG\n")  # line 13
    frames = [(app_source, "<module>", 1, 13)]
    profile = build(frames, [(1, (0,), 10 * MS, 0, 0, 0, 1, 0)])
    text = render(profile, width=width)
    assert max(len(r) for r in text.splitlines()) <= width
    long_row = row_for(text, "x = 'long")
    assert long_row.endswith("…") and len(long_row) == width


def test_narrower_widths_are_raised_to_the_minimum(app_profile):
    text = render(app_profile, width=20)
    assert max(len(r) for r in text.splitlines()) == terminal.MIN_WIDTH
    assert "total = sum" in row_for(text, "   3 ")


def test_width_defaults_to_the_terminal_size(app_profile, monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    stream = io.StringIO()
    terminal.render(app_profile, stream, color=False)
    assert max(len(r) for r in stream.getvalue().splitlines()) == 72


def test_wide_characters_count_as_two_cells(build, tmp_path):
    path = tmp_path / "wide.py"
    path.write_text("s = '" + "漢" * 80 + "'\n", encoding="utf-8")
    profile = build([(str(path), "<module>", 1, 1)], [(1, (0,), MS, 0, 0, 0, 1, 0)])
    row = row_for(render(profile, width=60), "漢")
    cells = sum(2 if c == "漢" else 1 for c in row)
    assert 58 <= cells <= 60


def test_colour_only_when_asked(app_profile):
    plain = render(app_profile, color=False)
    assert not ANSI.search(plain)
    coloured = render(app_profile, color=True)
    hot = row_for(coloured, "# HOT")
    assert hot.startswith("\x1b[1;31m") and hot.endswith("\x1b[0m")
    assert not row_for(coloured, "# COLD").startswith("\x1b[1;31m")
    assert ANSI.sub("", coloured) == plain


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_default_colour_follows_tty_and_no_color(app_profile, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = io.StringIO()
    terminal.render(app_profile, stream, width=100)
    assert not ANSI.search(stream.getvalue())  # not a TTY
    tty = _Tty()
    terminal.render(app_profile, tty, width=100)
    assert ANSI.search(tty.getvalue())
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    terminal.render(app_profile, tty, width=100)
    assert not ANSI.search(tty.getvalue())


def test_missing_source_is_reported_and_lines_still_shown(build):
    frames = [("/nonexistent/gone.py", "f", 10, 12), ("<stdin>", "<module>", 1, 4)]
    profile = build(frames, [(1, (0, 1), 30 * MS, 0, 0, 0, 3, 0),
                             (1, (1,), 10 * MS, 0, 0, 0, 1, 0)])
    text = render(profile)
    assert "(source not available: file not found)" in text
    assert "(source not available: not a file on disk)" in text
    assert row_for(text, "  12 ").split()[2] == "75.0%"
    assert row_for(text, "   4 ").split()[2] == "25.0%"


def test_ascii_only_streams_get_ascii_glyphs(app_profile):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    terminal.render(app_profile, stream, width=70, color=False)
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert " | " in text and "..." in text


def test_control_characters_in_source_cannot_break_rows(build, tmp_path):
    path = tmp_path / "ctl.py"
    path.write_bytes(b"x = '\x1b[31m\x0b\x07'  # CTL\n")
    profile = build([(str(path), "<module>", 1, 1)], [(1, (0,), MS, 0, 0, 0, 1, 0)])
    row = row_for(render(profile), "# CTL")
    assert "\x1b" not in row and "\x0b" not in row and "\x07" not in row


def test_profile_without_samples(build):
    text = render(build([], []))
    assert "no time was sampled (0 samples)" in text


def test_line_zero_is_shown_as_unknown(build):
    profile = build([("/nonexistent/a.py", "f", 1, -1)], [(1, (0,), MS, 0, 0, 0, 1, 0)])
    assert "(line unknown)" in row_for(render(profile), "   ? ")
