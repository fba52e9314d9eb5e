"""Stand-ins for standard-library functions, for the process peakline profiles.

Whatever peakline imports before the program runs is resident while it runs, and its memory
adds to the program's peak. Each function here does one job of a standard module that would
otherwise be imported into the profiled program for that job alone. Only those whose saving
was measured and is still real are kept (benchmarks/stand_ins.py; the figures are in
docs/architecture.md, "peakline's own memory"), and each is tested against the library it
replaces (tests/python/test_lean.py; the option parser in test_cli_options.py). Everywhere
else, peakline uses the library.

| here                      | instead of                               |
|---------------------------|------------------------------------------|
| ``parse_plain_options``   | argparse (re, gettext, locale, shutil)   |
| ``json_text``             | json.dumps (json, re)                    |
| ``temporary_bases``       | tempfile (shutil, random, bz2, lzma)     |
| ``code_of_file``          | runpy.run_path (pkgutil, typing)         |
| ``path_importer``         | pkgutil.get_importer                     |
| ``all_opmap``             | dis._all_opmap (dis)                     |
| ``free_threaded_build``   | sysconfig ``Py_GIL_DISABLED``            |

Nothing here imports more than os and sys at module level; inside, only what the interpreter
has loaded at start-up anyway (io, marshal, its frozen importlib) and the small opcode module.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # no typing import while the program runs (see peakline/api.py)
if TYPE_CHECKING:
    import types
    from collections.abc import Sequence


# ---- argparse ------------------------------------------------------------------------------

def parse_plain_options(tokens: Sequence[str], options: Sequence) -> dict | None:
    """The plain forms of cli.options.Option declarations (``--flag``, ``--name VALUE``,
    ``--name=VALUE``; given twice, the last wins, as in argparse) as {dest: value}, defaults
    included; None for anything else (--help, an abbreviated or unknown option, a value that
    does not convert or looks like an option): argparse, built from the same declarations,
    then decides and words the error (cli/options.py)."""
    by_flag = {f: o for o in options for f in o.flags}
    values: dict[str, object] = {}
    for o in options:
        values.setdefault(o.dest, o.default)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        attached = token.startswith("--") and "=" in token
        flag, _, value = token.partition("=") if attached else (token, "", "")
        option = by_flag.get(flag)
        if option is None:
            return None
        if option.is_const:
            if attached:
                return None  # argparse: "ignored explicit argument"
            values[option.dest] = option.const
        else:
            if not attached:
                if i + 1 >= len(tokens) or tokens[i + 1].startswith("-"):
                    return None  # missing, or argparse's rules for option-like values
                i += 1
                value = tokens[i]
            try:
                values[option.dest] = option.convert(value)
            except (ValueError, TypeError):
                return None
        i += 1
    return values


# ---- json ----------------------------------------------------------------------------------

_SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def json_text(value: object) -> str:
    """``json.dumps(value)`` for str, bool, int, float, None, lists, tuples and dicts with str
    keys (the children's options, a child's started marker); anything else (inf, nan, other
    types) goes to the json module itself."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and value - value == 0:  # finite
        return float.__repr__(value)
    if isinstance(value, str):
        out = ['"']
        for ch in value:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ch in _SHORT_ESCAPES:
                out.append(_SHORT_ESCAPES[ch])
            elif ch < " " or ch > "~":  # ASCII only, as json.dumps writes it
                code = ord(ch)
                if code > 0xFFFF:  # a surrogate pair
                    code -= 0x10000
                    out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
                else:
                    out.append(f"\\u{code:04x}")
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json_text(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{json_text(k)}: {json_text(v)}" for k, v in value.items()) + "}"
    import json
    return json.dumps(value)


# ---- tempfile ------------------------------------------------------------------------------

def temporary_bases() -> list[str]:
    """The folders tempfile tries for a temporary directory, in its order
    (``tempfile._candidate_tempdir_list`` on POSIX): $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp,
    /usr/tmp, the working directory."""
    bases = [v for v in (os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")) if v]
    bases += ["/tmp", "/var/tmp", "/usr/tmp"]
    try:
        bases.append(os.getcwd())
    except OSError:
        bases.append(os.curdir)
    return bases


# ---- runpy, pkgutil ------------------------------------------------------------------------

def path_importer(path: str):
    """``pkgutil.get_importer(path)``: the importer an import path hook gives for path (a zip
    archive, a directory), cached in sys.path_importer_cache, or None."""
    try:
        return sys.path_importer_cache[path]
    except KeyError:
        pass
    for hook in sys.path_hooks:
        try:
            importer = hook(path)
        except ImportError:
            continue
        sys.path_importer_cache.setdefault(path, importer)
        return importer
    return None


def code_of_file(path: str) -> tuple[types.CodeType, bool]:
    """(code, compiled?) of a file as ``runpy.run_path`` reads it: a compiled file (.pyc:
    magic number, 12 more header bytes, marshalled code) or source, compiled as the
    interpreter compiles a script, without inheriting the caller's ``from __future__``
    flags. OSError when it cannot be read; SyntaxError (ValueError on 3.10 for a NUL byte)
    when it does not compile."""
    import io
    try:  # the interpreter's own copy of importlib's bootstrap: always loaded
        from _frozen_importlib_external import MAGIC_NUMBER
    except ImportError:
        from importlib.util import MAGIC_NUMBER
    with io.open_code(path) as f:
        if f.read(len(MAGIC_NUMBER)) == MAGIC_NUMBER:
            import marshal
            f.read(12)
            return marshal.load(f), True
        f.seek(0)
        source = f.read()
    try:
        return compile(source, path, "exec", dont_inherit=True), False
    except ValueError:
        if b"\0" not in source:
            raise
        # 3.10's compile() refuses a NUL byte with a ValueError; the interpreter running the
        # file fails with a SyntaxError (exit status 1), in 3.12+'s words below.
        raise SyntaxError("source code cannot contain null bytes", (path, 1, 1, None)) from None


# ---- dis, sysconfig ------------------------------------------------------------------------

def all_opmap() -> dict[str, int]:
    """Every opcode of this interpreter by name, specialised forms included (what
    ``dis._all_opmap`` holds), built from the small ``opcode`` module."""
    import opcode
    table = dict(opcode.opmap)
    specialized = getattr(opcode, "_specialized_opmap", None)  # 3.13+
    if specialized is not None:
        table.update(specialized)
    else:  # 3.11, 3.12: the specialised forms fill the unnamed slots ("<N>"), in order
        empty = [op for op, name in enumerate(opcode.opname) if name.startswith("<")]
        table.update(zip(getattr(opcode, "_specialized_instructions", ()), empty))
    return table


def free_threaded_build() -> bool:
    """True on a free-threaded CPython build (3.14t, 3.15t: no GIL): sysconfig's
    ``Py_GIL_DISABLED``, read from the interpreter's own ABI flag "t", which the build sets
    with it (sysconfig would load the build's configuration data)."""
    return "t" in getattr(sys, "abiflags", "")
