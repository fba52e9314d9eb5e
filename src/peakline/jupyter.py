"""IPython/Jupyter magics: ``%load_ext peakline``, then

    %peakline [options] statement     profile one statement
    %%peakline [options]              profile the whole cell

CPU and memory are both measured in the kernel's own process (no re-exec: the core patches
the loaded libraries' allocation functions in place). The cell runs in the notebook's
namespace, compiled under IPython's name for it, so its lines are reported with their source.

**The report is about the cell.** Files that are notebook cells are named ``cell [N]``
(IPython's ``In [N]``), the title is the cell, not the kernel's command line, and the
kernel's own threads (heartbeat, IOPub, control, ...) wait in library code all the time: their
waiting is background wait (``Profile.background_wait_by_thread``), shown apart and not in the
denominator of the cell's percentages.

**Each output stands alone** (docs/reports.md, "Jupyter"). One display carries:

* ``text/plain``: the terminal report (terminal IPython, ``nbconvert --to rst``, anything
  that shows text);
* ``text/html``: a static summary (reporters/static_html.py: no script, inline styles, read
  where scripts do not run: untrusted notebooks, GitHub's preview, sanitising viewers) and a
  small script that, where scripts do run, hides the summary and puts the full HTML report
  (reporters/html.py) in an ``<iframe srcdoc>``. The iframe is a document of its own, so two
  reports in one notebook share no element id, stylesheet or script state; the page travels
  as a JSON string in a ``<script type="application/json">`` inside the output's own element
  (escaped so that ``</script>`` cannot occur), and the script finds that element by a
  random id, never by a fixed one.

Options are the command line's (`peakline run` / `peakline view`), same names, types,
checks and messages, from the same declarations (peakline/run_options.py for what is
measured, cli/options.py for the reports): ``-o/--outfile PATH``, ``--cpu-only``,
``--memory-sampling-interval BYTES`` (``512K``), ``--cpu-sampling-rate SECONDS``,
``--profile-all``, ``--profile-only A,B``, ``--profile-exclude A,B``, ``--gpu``/``--no-gpu``,
``--no-children``, ``--all-lines``, ``--reduced-profile``, ``--cpu-percent-threshold PCT``,
``--malloc-threshold BYTES``. ``--reduced`` is the older spelling of ``--reduced-profile``
and still works.
"""

from __future__ import annotations

import html as _html
import io
import json
import linecache
import shlex
import sys
import uuid

from peakline import api, run_options
from peakline.cli import options as _options
from peakline.cli.options import Option

IFRAME_MAX_HEIGHT_PX = 900  # taller reports scroll inside their frame
TEXT_WIDTH = 100  # text/plain: the terminal report at this width

_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def _magic_options() -> list[Option]:
    """What a run measures (run_options), how the report shows it (`peakline run`'s report
    options), and the older spelling --reduced."""
    report = [o for o in _options.output_options(_options.RUN)
              if o.dest in ("all_lines", "reduced_profile", "cpu_percent_threshold",
                            "malloc_threshold")]
    return [*run_options.cli_options(), *report,
            Option("--reduced", dest="reduced_profile", convert=None, const=True,
                   help="older spelling of --reduced-profile")]


def _parser():
    return _options.build_parser(_magic_options(), prog="%peakline",
                                 usage="%%%%peakline [options]   or   %%peakline [options] "
                                       "statement")  # argparse %-formats the usage


def _checked(opts):
    """``opts`` after the checks every surface makes; argparse's usage and error otherwise
    (SystemExit, as for a bad option)."""
    try:
        return run_options.checked(opts, run_options.flag_name)
    except ValueError as error:
        _parser().error(str(error))


def _split(line: str):
    """(options, statement) of a line magic: options first, the statement after them."""
    tokens = shlex.split(line, posix=True) if line.strip().startswith("-") else []
    if not tokens:
        return _parser().parse_args([]), line.strip()
    takes_value = _options.value_flags(_magic_options())
    consumed, i = [], 0
    while i < len(tokens) and tokens[i].startswith("-"):
        consumed.append(tokens[i])
        if tokens[i] in takes_value and i + 1 < len(tokens):
            consumed.append(tokens[i + 1])
            i += 1
        i += 1
    opts = _parser().parse_args(consumed)
    rest = line
    for token in consumed:  # drop the option text from the statement
        rest = rest.split(token, 1)[1] if token in rest else rest
    return opts, rest.strip()


def report_filter(opts, profile):
    from peakline.reporters import report_filter as make
    return make(opts, profile)


def render_text(profile, rules) -> str:
    """text/plain: the terminal report, without colour."""
    from peakline.reporters import terminal
    buffer = io.StringIO()
    terminal.render(profile, buffer, width=TEXT_WIDTH, color=False, reduced=rules.reduced,
                    cpu_percent_threshold=rules.cpu_percent_threshold,
                    malloc_threshold_bytes=rules.malloc_threshold_bytes)
    return buffer.getvalue()


def render_html(profile, rules) -> str:
    """text/html: the static summary, and the script that swaps in the full page in an
    iframe where scripts run (see the module doc)."""
    from peakline.reporters import html as page_reporter
    from peakline.reporters import static_html

    static = io.StringIO()
    static_html.render(profile, static, reduced=rules.reduced,
                       cpu_percent_threshold=rules.cpu_percent_threshold,
                       malloc_threshold_bytes=rules.malloc_threshold_bytes)
    page = io.StringIO()
    try:
        page_reporter.render(profile, page, reduced=rules.reduced,
                             cpu_percent_threshold=rules.cpu_percent_threshold,
                             malloc_threshold_bytes=rules.malloc_threshold_bytes)
    except Exception as error:  # noqa: BLE001 - the static summary still shows
        print(f"peakline: HTML report failed ({type(error).__name__}: {error}); showing the "
              f"static summary", file=sys.stderr)
        return f'<div class="peakline-output">{static.getvalue()}</div>'
    element_id = f"peakline-{uuid.uuid4().hex}"
    payload = json.dumps(page.getvalue(), ensure_ascii=True).translate(_JSON_ESCAPES)
    return (
        f'<div class="peakline-output" id="{element_id}">'
        f"{static.getvalue()}"
        f'<script type="application/json" class="peakline-page">{payload}</script>'
        f"<script>{_SWAP_SCRIPT.replace('ELEMENT_ID', element_id)}</script>"
        "</div>")


# Runs where the front end runs output scripts (trusted notebooks, nbconvert's HTML opened in
# a browser). Found by the output's own random id: JupyterLab, classic Notebook (jQuery runs
# the script after inserting the output) and VS Code all insert the element first.
_SWAP_SCRIPT = """(function () {
  var root = document.getElementById("ELEMENT_ID");
  if (!root || root.querySelector("iframe")) return;
  var data = root.querySelector("script.peakline-page"), page;
  try { page = JSON.parse(data.textContent); } catch (e) { return; }
  var frame = document.createElement("iframe");
  frame.className = "peakline-report";
  frame.title = "peakline report";
  frame.style.cssText = "width:100%;height:600px;border:1px solid #ccc;border-radius:4px;"
    + "resize:vertical;background:#fff";
  frame.onload = function () {
    try {
      var h = frame.contentDocument.documentElement.scrollHeight;
      if (h > 0) frame.style.height = Math.min(h + 24, MAX_HEIGHT) + "px";
    } catch (e) { /* another origin: keep the default height */ }
  };
  frame.srcdoc = page;
  var fallback = root.querySelector(".peakline-static");
  if (fallback) fallback.style.display = "none";
  root.appendChild(frame);
})();""".replace("MAX_HEIGHT", str(IFRAME_MAX_HEIGHT_PX))


class _Magics:
    def __init__(self, shell) -> None:
        self.shell = shell

    def run(self, code: str, opts, label: str):
        values = _options.Values(**vars(opts))
        values.outfile = None  # written here, once the cells have their names
        filename = self._cell_filename(code)
        # The cell as IPython ran it is only the magic's call (`run_cell_magic(...)`): its
        # time is peakline's own start and stop, not the cell's, so it is not reported.
        values.profile_exclude = (*opts.profile_exclude, *self._magic_call_names(filename))
        compiled = compile(code, filename, "exec")
        api.start_values(values, program=label)
        try:
            exec(compiled, self.shell.user_ns)  # noqa: S102 - the user's own cell
        finally:
            profile = self._about_the_cell(api.stop(), label)
            if opts.outfile:
                from peakline.model.profile_file import write_profile
                write_profile(profile, opts.outfile)
            self._display(profile, opts)
        return None

    def _execution_count(self) -> int:
        """This cell's number (its ``In [N]``). The input history already holds the running
        cell in every IPython version, whereas ``execution_count`` is incremented before the
        cell runs in IPython 9 and after it in IPython 8."""
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None)
        if history:
            return len(history) - 1
        return int(getattr(self.shell, "execution_count", 0) or 0)

    def _cell_filename(self, code: str) -> str:
        """IPython's own name for this source, registered with this cell's number, so the
        cell's lines are reported, their source found, and the file named ``cell [N]``."""
        compiler = getattr(self.shell, "compile", None)
        cache = getattr(compiler, "cache", None)
        if cache is not None:
            try:
                return cache(code, self._execution_count())
            except Exception:  # noqa: BLE001 - older IPython: fall back below
                pass
        name = f"/tmp/peakline-cell-{abs(hash(code))}.py"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        return name

    def _magic_call_names(self, filename: str) -> tuple[str, ...]:
        """IPython's names for this cell's other code: the code that called the magic."""
        numbers = getattr(getattr(self.shell, "compile", None), "_filename_map", None) or {}
        number = numbers.get(filename)
        return tuple(name for name, n in numbers.items()
                     if n == number and name != filename) if number is not None else ()

    def _cell_names(self, filenames) -> dict[str, str]:
        """``{IPython's file name: "cell [N]"}`` for the files that are notebook cells."""
        numbers = getattr(getattr(self.shell, "compile", None), "_filename_map", None) or {}
        names = {}
        for filename in filenames:
            number = numbers.get(filename)
            if number is not None:
                names[filename] = f"cell [{number}]"
        return names

    def _about_the_cell(self, profile, label: str):
        """The profile as the notebook user reads it: cells named ``cell [N]`` (with their
        source registered under that name), the title the cell, not the kernel's argv."""
        profile.argv = [label]
        profile.program = label
        renames = self._cell_names(profile.files)
        if renames:
            rename_files(profile, renames)
            for old, new in renames.items():
                lines = linecache.getlines(old)
                if lines:
                    linecache.cache[new] = (sum(map(len, lines)), None, lines, new)
        return profile

    def _display(self, profile, opts) -> None:
        rules = report_filter(opts, profile)
        text = render_text(profile, rules)
        try:
            bundle = {"text/plain": text, "text/html": render_html(profile, rules)}
        except Exception as error:  # noqa: BLE001 - the text report still shows
            print(f"peakline: HTML output failed ({type(error).__name__}: {error})",
                  file=sys.stderr)
            bundle = {"text/plain": text}
        try:
            from IPython.display import display
            display(bundle, raw=True)
        except ImportError:  # pragma: no cover - IPython is what calls us
            print(text, file=sys.stderr)

    # -- the magic entry points -----------------------------------------------------------

    def line(self, line: str, cell: str | None = None):
        label = f"cell [{self._execution_count()}]"
        try:
            if cell is None:
                opts, statement = _split(line)
                _checked(opts)
                if not statement:
                    print("usage: %peakline [options] statement   or   %%peakline [options]",
                          file=sys.stderr)
                    return None
                return self.run(statement, opts, label)
            opts = _checked(_parser().parse_args(shlex.split(line)))
        except SystemExit:  # argparse printed the usage and the error (or --help)
            return None
        return self.run(cell, opts, label)


def rename_files(profile, renames: dict[str, str]) -> None:
    """Renames reported files (and their frames in ``stacks``) in place."""
    taken = set(profile.files) - set(renames)
    unique = {}
    for old, new in renames.items():  # two files of one cell: "cell [4]", "cell [4] (2)"
        name, k = new, 1
        while name in taken:
            k += 1
            name = f"{new} ({k})"
        unique[old] = name
        taken.add(name)
    renames.clear()
    renames.update(unique)
    profile.files = {renames.get(name, name): record for name, record in profile.files.items()}
    profile.stacks.frames = [(renames.get(f[0], f[0]), *f[1:]) if f else f
                             for f in profile.stacks.frames]


def load_ipython_extension(ipython) -> None:
    magics = _Magics(ipython)
    ipython.register_magic_function(magics.line, magic_kind="line_cell", magic_name="peakline")
