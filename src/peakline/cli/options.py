"""Command-line options, declared once, parsed without argparse on the common path.

`peakline run` must add as little as it can to the program it runs, and argparse comes with
re, gettext, locale and shutil (which imports zlib, bz2 and lzma), resident in the profiled
process for a dozen options (peakline/_lean.py). So each option is declared once, as an
`Option`; `parse` reads the plain forms itself (_lean.parse_plain_options: ``--flag``,
``--name VALUE``, ``--name=VALUE``; an option given twice: the last wins, as argparse does),
and gives up on anything else (--help, an abbreviated or unknown option, a value that does
not convert or looks like an option). Then `parse_with_argparse` builds the argparse parser
from the same declarations, which prints the usual help or error message.
tests/python/test_cli_options.py checks that both read every command line the same way.
Commands whose process is not profiled (check, sweep, attach, ...) use argparse itself.

The options of a profiling run (what it measures) are declared in peakline/run_options.py,
for the command line, the API and the Jupyter magics at once.

The output options that `run` and `view` share are declared here too (`output_options`):
one list, so the two commands cannot drift apart.

Every parser is built without prefix abbreviations (``allow_abbrev=False``): ``--memory``
must not quietly mean ``--memory-sampling-interval``. Flags of other profilers (Scalene,
memray, py-spy) that peakline does not have are answered with peakline's equivalent
(``FOREIGN_FLAGS``) instead of argparse's "unrecognized arguments".
"""

from __future__ import annotations

TYPE_CHECKING = False  # no typing import while the program runs (see peakline/api.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

RUN = "run"
VIEW = "view"


class Option:
    """One option. ``const`` options store ``const`` when given (``--cpu-only``); the others
    take one value, converted by ``convert`` (a ValueError from it is a usage error; for
    float/int argparse words it as "invalid float value", otherwise the error's message).

    The options of a profiling run (peakline/run_options.py) also carry the Python API's name
    for themselves (``keyword``) and ``check``: what every value must pass after parsing,
    whichever surface it came through (ValueError with the message every surface shows)."""

    __slots__ = ("flags", "dest", "convert", "default", "const", "is_const", "metavar", "help",
                 "group", "keyword", "check")

    def __init__(self, *flags: str, dest: str, convert: Callable[[str], object] | None = str,
                 default: object = None, const: object = None, metavar: str | None = None,
                 help: str | None = None, group: str | None = None,  # noqa: A002
                 keyword: str | None = None,
                 check: Callable[[object], object] | None = None) -> None:
        self.flags = flags
        self.dest = dest
        self.is_const = convert is None
        self.convert = convert
        self.default = default
        self.const = const
        self.metavar = metavar
        self.help = help
        self.group = group
        self.keyword = keyword
        self.check = check


class Values:
    """The parsed options, as attributes (what argparse's Namespace is to its callers)."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other)

    def __repr__(self) -> str:
        return "Values(" + ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items())) + ")"


def value_flags(options: Iterable[Option]) -> frozenset[str]:
    """The flags that take a value (the next token is theirs, not the program's)."""
    return frozenset(f for o in options if not o.is_const for f in o.flags)


def parse(tokens: Sequence[str], options: Sequence[Option]) -> Values | None:
    """The options in tokens, or None when argparse must decide (see the module doc)."""
    from peakline._lean import parse_plain_options

    values = parse_plain_options(tokens, options)
    return None if values is None else Values(**values)


def split_tokens(tokens: Sequence[str], options: Iterable[Option],
                 value_flags: frozenset[str]) -> tuple[list[str], list[str]]:
    """(the tokens of ``options``, with their values; the other tokens), in order, of a
    command line already parsed; ``value_flags``: every flag of it that takes a value."""
    flags = {f for o in options for f in o.flags}
    theirs: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        flag = tokens[i].partition("=")[0] if tokens[i].startswith("--") else tokens[i]
        width = 2 if tokens[i] in value_flags else 1
        (theirs if flag in flags else rest).extend(tokens[i:i + width])
        i += width
    return theirs, rest


def parse_with_parser(tokens: Sequence[str], parser) -> Values:
    """argparse's reading of tokens as Values (the commands whose process is not profiled
    use argparse itself)."""
    return Values(**vars(parser.parse_args(list(tokens))))


def build_parser(options: Sequence[Option], *, one_line_errors: bool = False, **parser_args):
    """The argparse parser for the same options (help, errors, the uncommon forms), without
    prefix abbreviations, answering other profilers' flags (see the module doc).
    ``one_line_errors``: a bad command line raises UsageError (one line, exit status 2)
    instead of printing the usage."""
    import argparse

    parser_args.setdefault("allow_abbrev", False)
    parser = _parser_class()(**parser_args)
    if one_line_errors:
        def error(message: str):
            from peakline.errors import UsageError
            raise UsageError(f"{message} (see `{parser.prog} --help`)")

        parser.error = error
    groups: dict[str, argparse._ArgumentGroup] = {}
    defaults: dict[str, object] = {}
    for o in options:
        target = parser
        if o.group is not None:
            if o.group not in groups:
                groups[o.group] = parser.add_argument_group(o.group)
            target = groups[o.group]
        kwargs: dict[str, object] = {"dest": o.dest, "help": o.help}
        if o.is_const:
            kwargs.update(action="store_const", const=o.const)
        else:
            kwargs.update(type=_argparse_type(o.convert), metavar=o.metavar)
        target.add_argument(*o.flags, **kwargs)
        defaults.setdefault(o.dest, o.default)
    parser.set_defaults(**defaults)
    return parser


# Flags users bring from Scalene, memray and py-spy that peakline does not have (or spells
# differently), with what to use instead. A flag peakline has (--cpu-only, --reduced-profile,
# --html OUT, --json OUT, --outfile, --profile-all, --gpu ...) is never in this table.
FOREIGN_FLAGS = {
    "--cpu": "peakline always samples CPU time; --cpu-only turns memory profiling off",
    "--memory": "memory is profiled by default; --memory-sampling-interval BYTES sets its "
                "precision (e.g. 64K), --cpu-only turns it off",
    "--cli": "the terminal report is the default (`peakline run` prints it on stderr, "
             "`peakline view PROFILE` on stdout)",
    "--web": "write --html OUT.html and open it in a browser (one file, works offline)",
    "--viewer": "write --html OUT.html and open it in a browser (one file, works offline)",
    "--native": "native (C/C++) time and allocations are always measured: see the 'native' "
                "columns",
    "--trace-python-allocators": "Python allocations are always sampled; "
                                 "--memory-sampling-interval BYTES sets the rate",
    "--follow-fork": "child processes are profiled and merged by default (--no-children "
                     "turns it off)",
    "--subprocesses": "child processes are profiled and merged by default (--no-children "
                      "turns it off)",
    "--force": "peakline overwrites its output files without asking",
    "--rate": "--cpu-sampling-rate SECONDS (an interval: 100 samples/s is 0.01)",
    "--idle": "waiting threads are always sampled: see the 'wait' column",
    "--threads": "every thread is sampled; the report's header lists them",
    "--format": "choose the output by flag: --html OUT, --json OUT, --speedscope OUT",
    "--stacks": "call stacks are always recorded: --html shows a flame graph, --speedscope "
                "OUT exports them",
    "--program-path": "--profile-only PATH reports only files whose path contains PATH",
    "--memory-leak-detector": "possible leaks are reported by default (the 'Possible leaks' "
                              "list)",
    "--reduced": "--reduced-profile (now the default: only active lines); --all-lines shows "
                 "every line",
}


def foreign_flag(tokens: Sequence[str], options: Sequence[Option]) -> str | None:
    """A one-line answer for the first flag in tokens that peakline does not have but another
    profiler does, or None. Values of peakline's own value options are skipped."""
    ours = {f for o in options for f in o.flags}
    takes_value = value_flags(options)
    i = 0
    while i < len(tokens):
        flag = tokens[i].partition("=")[0]
        if flag in takes_value and "=" not in tokens[i]:
            i += 2
            continue
        if flag not in ours and flag in FOREIGN_FLAGS:
            return f"{flag} is not a peakline option: {FOREIGN_FLAGS[flag]}"
        i += 1
    return None


def _parser_class():
    """argparse.ArgumentParser that answers FOREIGN_FLAGS with their peakline equivalent."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def parse_known_args(self, args=None, namespace=None):
            import sys
            tokens = list(sys.argv[1:] if args is None else args)
            answer = foreign_flag(tokens, _declared(self))
            if answer is not None:
                self.error(answer)
            return super().parse_known_args(tokens, namespace)

    return Parser


def parse_profiles_command(argv: Sequence[str], options: Sequence[Option], *, prog: str,
                           description: str, profiles_help: str) -> Values | int:
    """The command line of a command that reads saved profiles (compare, merge): its options,
    then one or more PROFILE.json (``profiles``). A bad one raises UsageError; the exit
    status instead of Values when argparse ended the parse (it printed the help)."""
    parser = build_parser(options, prog=prog, description=description, one_line_errors=True)
    parser.add_argument("profiles", nargs="+", metavar="PROFILE.json", help=profiles_help)
    try:
        return parse_with_parser(argv, parser)
    except SystemExit as exc:
        return int(exc.code or 0)


def _declared(parser) -> list[Option]:
    """The parser's own options as Options (flags and whether they take a value)."""
    out = []
    for action in parser._actions:
        if action.option_strings:
            const = action.nargs == 0
            out.append(Option(*action.option_strings, dest=action.dest,
                              convert=None if const else str))
    return out


def parse_with_argparse(tokens: Sequence[str], options: Sequence[Option], **parser_args) -> Values:
    """argparse's reading of tokens; SystemExit (after printing help or the error) as usual."""
    return parse_with_parser(tokens, build_parser(options, **parser_args))


def _argparse_type(convert: Callable[[str], object]):
    if convert in (str, int, float):
        return convert

    def checked(text: str) -> object:
        import argparse
        try:
            return convert(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    checked.__name__ = getattr(convert, "__name__", "value")
    return checked


# --- converters: ValueError with the message a user should read ---

def percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"not a percentage: {text!r}") from None
    if not 0 <= value <= 100:
        raise ValueError(f"must be between 0 and 100, got {text!r}")
    return value


def byte_size(text: str) -> int:
    from peakline.reporters._format import parse_byte_size
    return parse_byte_size(text)


def output_options(command: str) -> list[Option]:
    """The report options of `peakline run` and `peakline view`: output files (``--html``,
    ``--json``, ``--speedscope``; each takes OUT, '-' for standard output) and what the
    reports show (``--all-lines``, ``--reduced-profile``, the two thresholds). `view --json`
    without OUT, its older spelling, is read as ``--json -`` by cli/view.py."""
    group = "reports"
    out = [Option("--json", dest="json", metavar="OUT", group=group,
                  help="write the profile JSON here ('-' for standard output)")]
    if command == VIEW:
        out.insert(0, Option("--text", dest="text", convert=None, const=True, default=False,
                             group=group, help="terminal report (the default when no other "
                                               "output is chosen)"))
    from peakline.reporters import DEFAULT_CPU_PERCENT_THRESHOLD, DEFAULT_MALLOC_THRESHOLD_BYTES
    return out + [
        Option("--html", dest="html", metavar="OUT", group=group,
               help="write a self-contained HTML report (one file, works offline)"),
        Option("--speedscope", dest="speedscope", metavar="OUT", group=group,
               help="write the sampled stacks for https://www.speedscope.app"),
        Option("--all-lines", dest="all_lines", convert=None, const=True, default=False,
               group=group, help="show every source line of the reported files (default: "
                                 "only active lines, see the thresholds)"),
        Option("--reduced-profile", dest="reduced_profile", convert=None, const=True,
               default=False, group=group,
               help="show only lines with activity (the default; overrides --all-lines)"),
        Option("--cpu-percent-threshold", dest="cpu_percent_threshold", convert=percent,
               metavar="PCT", group=group,
               help="a line is active from this share of sampled time (default: "
                    f"{DEFAULT_CPU_PERCENT_THRESHOLD:g}); giving it implies --reduced-profile"),
        Option("--malloc-threshold", dest="malloc_threshold", convert=byte_size,
               metavar="BYTES", group=group,
               help="...or from this many bytes allocated (K, M, G suffixes; default: "
                    f"{DEFAULT_MALLOC_THRESHOLD_BYTES / (1 << 20):g} MiB); giving it implies "
                    "--reduced-profile"),
    ]
