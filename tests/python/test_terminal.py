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
    assert "35.1%" in wait  # 500 ms of 1425 ms: wait is a share like the other parts
    assert wait.count("35.1%") == 2  # and the total is the same 500 ms
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


# ---- memory (tests/python/synthetic_memory.py has the numbers) ---------------------------

from synthetic_memory import MiB, with_memory  # noqa: E402

from peakline.reporters import _format  # noqa: E402


@pytest.fixture
def mem_profile(app_profile):
    return with_memory(app_profile)


def mrender(profile, **options) -> str:
    """Wide enough that the memory table keeps every column and the source markers."""
    options.setdefault("width", 200)
    return render(profile, **options)


def table_row(text: str, marker: str) -> str:
    """The line-table row with ``marker`` (the highlight sections quote source too)."""
    return row_for("\n".join(r for r in text.splitlines() if "│" in r or "|" in r), marker)


def test_memory_header_shows_sparkline_peak_rss_and_growth(mem_profile):
    text = mrender(mem_profile, width=200)
    memory = row_for(text, "peak 590.5 MiB at 0.91 s")
    assert memory.strip().startswith("memory ") and "█" in memory
    assert "peak RSS 700.0 MiB" in text and "growth +12.0 MiB/s" in text
    assert "285.0 MiB live at end" in text and "sampled every 512.0 KiB" in text


def test_memory_columns_are_added_only_when_the_profile_has_memory(app_profile, mem_profile):
    plain = render(app_profile, width=160)
    assert "Python%" not in plain and "timeline" not in plain and "peak RSS" not in plain
    assert "▲" not in plain and "Lines holding memory" not in plain
    text = mrender(mem_profile, width=200)
    header = [r for r in text.splitlines() if "Line" in r and "source" in r][0]
    labels = [c.strip() for c in header.split("│")]
    assert labels == ["Line", "Python", "native", "system", "wait", "total", "alloc", "at peak",
                      "net", "Python%", "timeline", "(MB/s)", "source"]
    groups = [r for r in text.splitlines() if "Memory" in r and "Copy" in r][0]
    assert groups.index("Memory") < groups.index("Copy")
    native = table_row(text, "data = json.loads(text)  # NATIVE")
    cells = [c.strip() for c in native.split("│")]
    assert cells[6] == "200M" and cells[7] == "200M"  # allocated, held at the peak
    waits = [c.strip() for c in table_row(text, "# WAIT").split("│")]
    assert waits[6] == "80M" and waits[7] == "60M" and waits[8] == "+80M"
    assert cells[9] == "0%" and cells[8] == "+200M" and cells[11] == "430"  # 429.5 MB/s
    assert cells[10] and set(cells[10]) <= set(_format.SPARK_BLOCKS + " ")
    hot = [c.strip() for c in table_row(text, "# HOT").split("│")]
    assert hot[9] == "100%" and hot[8] == ""  # all Python, all freed


def test_line_sparkline_keeps_a_short_spike(mem_profile):
    # line 3 holds 50 MiB only between 1.0 s and 1.2 s of a 2.5 s run
    cells = [c.strip(" ") for c in table_row(mrender(mem_profile, width=200), "# HOT").split("│")]
    spark = cells[10]
    assert "█" in spark and spark.count("█") <= 2


def test_peak_holders_are_marked_and_listed(mem_profile):
    text = mrender(mem_profile, width=200)
    assert "Lines holding memory at the peak (590.5 MiB at 0.91 s)" in text
    listed = [r for r in text.splitlines() if r.startswith("  ▲ ")]
    assert [r.split()[1] for r in listed] == ["app.py:5", "app.py:9"]  # 11 holds < 5%
    assert "200.0 MiB" in listed[0] and "34%" in listed[0]
    assert table_row(text, "# NATIVE").startswith("▲")
    assert not table_row(text, "# COLD").startswith("▲")
    coloured = mrender(mem_profile, width=200, color=True)
    # line 5 is also hot (21%): red row, the marker keeps its own colour
    assert table_row(coloured, "# NATIVE").startswith("\x1b[1;35m▲\x1b[0m\x1b[1;31m")
    assert ANSI.sub("", coloured) == mrender(mem_profile, width=200)


def test_possible_leaks_section_lists_flagged_lines_only(mem_profile):
    text = mrender(mem_profile, width=200)
    assert "Possible leaks" in text
    section = text.split("Possible leaks", 1)[1].split("\n\n", 1)[0]
    assert "app.py:9" in section and "99%" in section and "+32.0 MiB/s" in section
    assert "80.0 MiB" in section and "time.sleep(0.5)" in section
    assert "app.py:11" not in section  # likelihood 0.90 < 0.95


def test_no_leak_section_without_leaks(mem_profile):
    for record in mem_profile.files.values():
        for line in record.lines:
            line.leak_likelihood = 0.0
    assert "Possible leaks" not in mrender(mem_profile)


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_memory_table_fits_and_drops_the_least_important_columns(mem_profile, width):
    text = mrender(mem_profile, width=width)
    assert max(len(r) for r in text.splitlines()) <= width
    header = [r for r in text.splitlines() if "Line" in r and "source" in r][0]
    labels = {c.strip() for c in header.split("│")}
    assert {"total", "Python", "native"} <= labels  # always kept
    if width >= 80:
        assert {"at peak", "alloc"} <= labels  # the memory a user ranks lines by
    if width <= 100:
        assert "(MB/s)" not in labels  # copy goes first
    if width <= 80:
        assert "system" not in labels
    if width >= 200:
        assert "(MB/s)" in labels and "timeline" in labels and "system" in labels
    flat = " ".join(r.strip() for r in text.splitlines())
    left_out = [flat[flat.index("Left out to fit"):flat.index("shows them")]] \
        if "Left out to fit" in flat else []
    all_columns = ["Python", "native", "system", "wait", "total", "alloc", "at peak", "net",
                   "Python%", "timeline", "(MB/s)"]
    missing = [c for c in all_columns if c not in labels]
    if missing:  # never dropped silently: named, with how to get them
        assert left_out and f"Left out to fit {width} columns:" in left_out[0]
        named = left_out[0].split("columns:", 1)[1]
        for column in missing:
            assert ("copy MB/s" if column == "(MB/s)" else column) in named
        assert "COLUMNS=200" in text and "--html" in text
    else:
        assert not left_out
    assert "source" in header and "def work(n):" in text


def test_ascii_streams_get_ascii_markers_and_sparklines(mem_profile):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    terminal.render(mem_profile, stream, width=160, color=False)
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "^ app.py:5" in text and table_row(text, "# NATIVE").startswith("^")


def test_functions_summary_has_memory_columns(mem_profile):
    text = mrender(mem_profile, width=200)
    header = row_for(text, "function (% of sampled time)")
    for label in ("alloc", "Python%", "net", "at peak"):
        assert label in header
    work = [c.strip() for c in row_for(text, "work (line 2)").split("│")]
    assert work[2:6] == ["250M", "20%", "+200M", "200M"]  # 50 Py + 200 native, net 200


def test_malloc_threshold_filters_in_reduced_mode(mem_profile):
    # line 11 (COLD) has 0.35% of time and 5 MiB allocated
    assert "# COLD" in mrender(mem_profile, reduced=True, malloc_threshold_bytes=4 * MiB)
    assert "# COLD" not in mrender(mem_profile, reduced=True, malloc_threshold_bytes=6 * MiB)
    # line 9 has 35% of time: shown whatever the malloc threshold
    assert "# WAIT" in mrender(mem_profile, reduced=True, malloc_threshold_bytes=1 << 40)
    # a high CPU threshold leaves only the lines that allocate enough
    text = mrender(mem_profile, reduced=True, cpu_percent_threshold=100,
                  malloc_threshold_bytes=60 * MiB)
    assert "# NATIVE" in text and "# WAIT" in text and "# HOT" not in text
    assert "function(s) below 100% of time or 60.0 MiB allocated hidden" in text


def test_cpu_percent_threshold_filters_in_reduced_mode(app_profile):
    # shares: line 3 42.1%, 5 21.1%, 9 35.1%, 11 0.35%
    text = render(app_profile, reduced=True, cpu_percent_threshold=30)
    assert "# HOT" in text and "# WAIT" in text
    assert "# NATIVE" not in text and "# COLD" not in text


# ---- formatting helpers -------------------------------------------------------------------

@pytest.mark.parametrize("n, signed, expected", [
    (0, True, ""), (512, False, "512B"), (999, False, "999B"), (1000, False, "1.0K"),
    (512 * 1024, False, "512K"), (200 * MiB, True, "+200M"), (-1536 * MiB, True, "-1.5G"),
    (5 * MiB, False, "5.0M"),
])
def test_compact_bytes(n, signed, expected):
    assert _format.compact_bytes(n, signed=signed) == expected


@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), ("512K", 512 * 1024), ("10m", 10 * MiB), ("1.5G", 3 * (1 << 29)),
    ("2MiB", 2 * MiB), ("3MB", 3 * MiB), ("0", 0),
])
def test_parse_byte_size(text, expected):
    assert _format.parse_byte_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "-1M", "1X", "nan", "inf", "1e30", "1e3K",
                                  "0x10", "1.2.3", "+5", "9223372036854775808", "8388608T"])
def test_parse_byte_size_rejects_garbage(text):
    with pytest.raises(ValueError) as error:
        _format.parse_byte_size(text)
    assert "\n" not in str(error.value)


def test_parse_byte_size_range():
    assert _format.parse_byte_size("9223372036854775807") == (1 << 63) - 1
    assert _format.parse_byte_size("1T", maximum=1 << 40) == 1 << 40
    with pytest.raises(ValueError, match="at most 1T"):
        _format.parse_byte_size("1025G", maximum=1 << 40)
    with pytest.raises(ValueError, match="at least 1K"):
        _format.parse_byte_size("1023", minimum=1024)


def test_resample_max_keeps_spikes_and_carries_values():
    points = [[0.0, 0], [1.0, 10], [1.1, 0], [5.0, 5]]
    assert _format.resample_max(points, 0, 10, 10) == [0, 10, 0, 0, 0, 5, 5, 5, 5, 5]
    assert _format.resample_max([[-1.0, 7]], 0, 1, 2) == [7, 7]
    assert _format.sparkline([0, 1, 8]) == " ▁█"
    assert _format.sparkline([0, 0]) == ""


def test_phases_and_processes_are_shown(app_profile):
    from peakline.model.profile import Profile

    doc = app_profile.to_dict()
    doc["phases"] = [
        {"name": "load", "depth": 0, "start_s": 0.0, "end_s": 0.5, "cpu_s": 0.4,
         "start_bytes": 0, "end_bytes": 100 << 20, "net_bytes": 100 << 20, "peak_bytes": 120 << 20},
        {"name": "fit", "depth": 1, "start_s": 0.5, "end_s": 2.0, "cpu_s": 1.2},
    ]
    doc["processes"] = [
        {"pid": 10, "program": "app.py", "argv": ["app.py"], "merged": True, "cpu_s": 1.0},
        {"pid": 11, "program": "worker", "argv": ["worker"], "merged": False},
    ]
    doc["peak_bytes_sum"] = 300 << 20
    text = render(Profile.from_dict(doc), width=120, color=False)
    assert "Phases" in text and "load" in text and "peak 120.0 MiB" in text
    assert "fit" in text and "wall 1.50 s" in text
    assert "Processes (1 of 2 merged" in text and "pid 11" in text and "not merged" in text
    assert "300.0 MiB" in text


def test_a_legend_explains_lines_columns_and_colours(mem_profile):
    text = mrender(mem_profile, width=100, reduced=True)
    assert "Lines: only active lines (1% of time or 1.0 MiB allocated)" in text
    assert "--all-lines shows every line" in text
    assert "total = Python + native + system + wait" in text
    assert "at peak: held at the peak" in text
    colours = row_for(text, "Colours:")
    assert "▲ magenta: holds memory at the peak" in colours and "red: 10%+ of the time" in colours
    assert "dim: no activity" in colours
    coloured = mrender(mem_profile, width=100, reduced=True, color=True)
    row = row_for(coloured, "Colours:")
    for word, style in (("▲ magenta", "\x1b[1;35m"), ("red:", "\x1b[1;31m"), ("dim:", "\x1b[2m")):
        assert f"{style}{word}\x1b[0m" in row  # each colour named in its own colour
    assert ANSI.sub("", coloured) == text
    assert "Lines: only active" not in mrender(mem_profile, width=100)  # full mode: no note


def test_the_total_is_cpu_plus_wait_in_the_same_unit(mem_profile):
    text = mrender(mem_profile, width=200)
    for marker in ("# HOT", "# NATIVE", "# WAIT"):
        cells = [c.strip() for c in table_row(text, marker).split("│")]
        parts = [float(c.rstrip("%")) if c.endswith("%") and c != "<0.1%" else 0.0
                 for c in cells[1:5]]
        assert cells[5].endswith("%")
        assert float(cells[5].rstrip("%")) == pytest.approx(sum(parts), abs=0.15), cells
