"""IPython/Jupyter magics: ``%load_ext peakline``, then

    %peakline statement          profile one statement
    %%peakline [-o out.json]     profile the whole cell

CPU and memory are both measured in the kernel's own process (no re-exec: the core patches
the loaded libraries' allocation functions in place). The cell runs in the notebook's
namespace, compiled under IPython's cell file name so its lines are reported with their
source. The report is displayed inline: the HTML report (``peakline.reporters.html``), or
the terminal report as preformatted text if that is unavailable or fails.

Options (before the statement / on the ``%%peakline`` line): ``-o PATH`` writes the profile
file, ``--cpu-only``, ``--memory-sampling-interval BYTES``, ``--profile-all``, ``--reduced``
(only lines with activity).
"""

from __future__ import annotations

import argparse
import html as _html
import io
import linecache
import shlex
import sys

from peakline import api


def _byte_size(text: str) -> int:
    from peakline.cli.run import memory_sampling_interval
    try:
        return memory_sampling_interval(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%peakline", add_help=False)
    p.add_argument("-o", "--outfile")
    p.add_argument("--cpu-only", action="store_true")
    p.add_argument("--memory-sampling-interval", type=_byte_size, default=None)
    p.add_argument("--profile-all", action="store_true")
    p.add_argument("--reduced", action="store_true")
    return p


def _split(line: str) -> tuple[argparse.Namespace, str]:
    """Options first, the statement after them (for the line magic)."""
    tokens = shlex.split(line, posix=True) if line.strip().startswith("-") else []
    parser = _parser()
    if not tokens:
        return parser.parse_args([]), line
    # Take option tokens until the first one that is not an option or an option's value.
    consumed, i = [], 0
    with_value = {"-o", "--outfile", "--memory-sampling-interval"}
    while i < len(tokens) and tokens[i].startswith("-"):
        consumed.append(tokens[i])
        if tokens[i] in with_value and i + 1 < len(tokens):
            consumed.append(tokens[i + 1])
            i += 1
        i += 1
    opts = parser.parse_args(consumed)
    rest = line
    for token in consumed:  # drop the option text from the statement
        rest = rest.split(token, 1)[1] if token in rest else rest
    return opts, rest.strip()


def render_html(profile, *, reduced: bool = False) -> str:
    """The inline report: peakline.reporters.html when available, else the terminal text."""
    try:
        from peakline.reporters import html as html_reporter
    except ImportError:
        html_reporter = None
    if html_reporter is not None and hasattr(html_reporter, "render"):
        buffer = io.StringIO()
        try:
            html_reporter.render(profile, buffer, reduced=reduced)
            return buffer.getvalue()
        except Exception as error:  # noqa: BLE001 - fall back to the text report below
            print(f"peakline: HTML report failed ({error}); showing the text report",
                  file=sys.stderr)
    from peakline.reporters import terminal

    buffer = io.StringIO()
    terminal.render(profile, buffer, reduced=reduced)
    return ('<pre class="peakline-report" style="font-size: 12px; line-height: 1.25">'
            + _html.escape(buffer.getvalue()) + "</pre>")


class _Magics:
    def __init__(self, shell) -> None:
        self.shell = shell

    def run(self, code: str, opts: argparse.Namespace):
        options = {"cpu_only": opts.cpu_only, "profile_all": opts.profile_all,
                   "program": "<notebook cell>", "children": True}
        if opts.memory_sampling_interval:
            options["memory_sampling_interval"] = opts.memory_sampling_interval
        filename = self._cell_filename(code)
        compiled = compile(code, filename, "exec")
        api.start(opts.outfile, **options)
        try:
            exec(compiled, self.shell.user_ns)  # noqa: S102 - the user's own cell
        finally:
            profile = api.stop()
            self._display(profile, opts)
        return None

    def _cell_filename(self, code: str) -> str:
        """IPython's own name for this source (a file path under the kernel's temp dir), so
        the cell's lines are reported and their source is found."""
        compiler = getattr(self.shell, "compile", None)
        cache = getattr(compiler, "cache", None)
        if cache is not None:
            try:
                return cache(code)
            except Exception:  # noqa: BLE001 - older IPython: fall back below
                pass
        name = f"/tmp/peakline-cell-{abs(hash(code))}.py"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        return name

    def _display(self, profile, opts: argparse.Namespace) -> None:
        text = render_html(profile, reduced=opts.reduced)
        try:
            from IPython.display import HTML, display
            display(HTML(text))
        except ImportError:  # pragma: no cover - IPython is what calls us
            print(text, file=sys.stderr)

    # -- the magic entry points -----------------------------------------------------------

    def line(self, line: str, cell: str | None = None):
        if cell is None:
            opts, statement = _split(line)
            if not statement:
                print("usage: %peakline [options] statement   or   %%peakline [options]",
                      file=sys.stderr)
                return None
            return self.run(statement, opts)
        opts = _parser().parse_args(shlex.split(line))
        return self.run(cell, opts)


def load_ipython_extension(ipython) -> None:
    magics = _Magics(ipython)
    ipython.register_magic_function(magics.line, magic_kind="line_cell", magic_name="peakline")
