"""peakline/_lean.py: each stand-in does what the standard-library function it replaces does.
(The option parser's equivalence with argparse: test_cli_options.py.)"""

from __future__ import annotations

import dis
import json
import marshal
import pkgutil
import py_compile
import sysconfig
import tempfile
import zipfile

import pytest

from peakline import _lean


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**70, 0.1, -1e300, 5e-324, "", "plain", 'quote " back \\ slash',
    "tab\tnew\nline\x00\x1f\x7f", "é ü ß 中文", "emoji 😀 𝄞", "\ud800 lone surrogate",
    [], [1, "a", None, [True]], (1, 2), {"a": 1, "b": [1.5, {"c": "d"}]}, {},
    float("inf"), float("nan"), {1: "int key"}, {"nested": {"x": (1, "y")}},
])
def test_json_text_is_json_dumps(value):
    assert _lean.json_text(value) == json.dumps(value)


def test_temporary_bases_are_tempfiles_candidates(monkeypatch, tmp_path):
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    assert _lean.temporary_bases() == tempfile._candidate_tempdir_list()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TMP", "/somewhere/else")
    assert _lean.temporary_bases() == tempfile._candidate_tempdir_list()


def test_path_importer_is_pkgutils_get_importer(tmp_path):
    archive = tmp_path / "app.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("__main__.py", "print('hi')\n")
    plain = tmp_path / "script.py"
    plain.write_text("x = 1\n")
    for path in (str(tmp_path), str(archive), str(plain), str(tmp_path / "missing")):
        ours = _lean.path_importer(path)
        theirs = pkgutil.get_importer(path)
        assert type(ours) is type(theirs), path


def _same_code(a, b) -> bool:
    return marshal.dumps(a) == marshal.dumps(b)


def test_code_of_file_compiles_a_script_as_the_interpreter_does(tmp_path):
    source = "from __future__ import annotations\nx: undefined_name = 1\nprint(x)\n"
    script = tmp_path / "script.py"
    script.write_text(source)
    code, compiled = _lean.code_of_file(str(script))
    assert compiled is False
    assert _same_code(code, compile(source.encode(), str(script), "exec", dont_inherit=True))
    # this test module's own `from __future__ import annotations` is not inherited
    plain = tmp_path / "plain.py"
    plain.write_text("def f(a: int): pass\n")
    code, _ = _lean.code_of_file(str(plain))
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102 - the test's own source
    assert namespace["f"].__annotations__ == {"a": int}


def test_code_of_file_reads_a_compiled_file(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("print(sum(range(10)))\n")
    pyc = py_compile.compile(str(script), cfile=str(tmp_path / "script.pyc"))
    code, compiled = _lean.code_of_file(pyc)
    assert compiled is True
    with open(pyc, "rb") as f:
        f.read(16)
        assert _same_code(code, marshal.load(f))


def test_code_of_file_fails_as_python_does(tmp_path):
    with pytest.raises(OSError):
        _lean.code_of_file(str(tmp_path / "missing.py"))
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    with pytest.raises(SyntaxError):
        _lean.code_of_file(str(bad))
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\0\n")
    with pytest.raises(SyntaxError):
        _lean.code_of_file(str(nul))


@pytest.mark.skipif(not hasattr(dis, "_all_opmap"), reason="dis has no _all_opmap before 3.11")
def test_all_opmap_is_dis_all_opmap():
    assert _lean.all_opmap() == dis._all_opmap


def test_free_threaded_build_is_sysconfigs_py_gil_disabled():
    assert _lean.free_threaded_build() == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
