"""Third-party suites: the pinned sdist's tests and a site folder with what they import.

For each suite, under the cache folder (benchmarks/compat/.cache, git-ignored; per Python
version, as the site folder holds compiled wheels):

    sdists/NAME-VER.tar.gz        pip download --no-binary :all: --no-deps NAME==VER
    PYTAG/NAME-VER/src/           the unpacked sdist (its tests/ and test configuration)
    PYTAG/NAME-VER/site/          pip install --target: the test requirements (with their
                                  dependencies), then the package itself built from the sdist

Runs put site/ first on PYTHONPATH, so the pinned versions win over whatever the interpreter
has installed, and run pytest in a copy of src/ (so pytest reads the suite's own configuration).
Nothing is installed into the interpreter's environment.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tarfile

from .targets import HERE, Target

DEFAULT_CACHE = HERE / ".cache"
_MARKER = ".prepared"
_LAYOUT = 2  # raise when prepare() changes what it leaves, so old cache folders are redone


def _log(message: str) -> None:
    print(f"[compat] {message}", file=sys.stderr, flush=True)


def _pip(python: str, *args: str) -> None:
    command = [python, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    _log("$ " + " ".join(command))
    subprocess.run(command, check=True)


def python_tag(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def folder(target: Target, python: str, cache: pathlib.Path) -> pathlib.Path:
    return cache / python_tag(python) / f"{target.distribution}-{target.version}"


def prepare(target: Target, python: str, cache: pathlib.Path) -> pathlib.Path:
    """Downloads, unpacks and installs `target` once; returns its folder (src/, site/)."""
    base = folder(target, python, cache)
    spec = " ".join([f"layout-{_LAYOUT}", f"{target.distribution}=={target.version}",
                     *target.test_requirements])
    marker = base / _MARKER
    if marker.exists() and marker.read_text() == spec:
        return base
    shutil.rmtree(base, ignore_errors=True)
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    pin = f"{target.distribution}=={target.version}"
    existing = _find_sdist(sdists, target)
    if existing is None:
        _pip(python, "download", "--no-binary", ":all:", "--no-deps", "-d", str(sdists), pin)
        existing = _find_sdist(sdists, target)
        if existing is None:
            raise RuntimeError(f"pip download of {pin} left no sdist in {sdists}")
    unpack = base / "unpack"
    unpack.mkdir(parents=True)
    with tarfile.open(existing) as archive:
        archive.extractall(unpack, filter="data")
    (top,) = list(unpack.iterdir())
    top.rename(base / "src")
    unpack.rmdir()
    site = base / "site"
    _pip(python, "install", "--target", str(site), *target.test_requirements)
    # Last, so the pinned package replaces any version a test requirement pulled in
    # (virtualenv needs filelock): --upgrade replaces its files; the other version's metadata
    # folder is removed so the site folder names one version.
    _pip(python, "install", "--target", str(site), "--upgrade", "--no-deps", str(existing))
    for name in _dist_names(target):
        for meta in site.glob(f"{name}-*.dist-info"):
            if not meta.name.endswith(f"-{target.version}.dist-info"):
                shutil.rmtree(meta)
    marker.write_text(spec)
    return base


def _dist_names(target: Target) -> set[str]:
    return {target.distribution, target.distribution.replace("-", "_")}


def _find_sdist(sdists: pathlib.Path, target: Target) -> pathlib.Path | None:
    stems = _dist_names(target)
    for path in sorted(sdists.glob("*.tar.gz")):
        name = path.name[: -len(".tar.gz")]
        if any(name.lower() == f"{stem}-{target.version}".lower() for stem in stems):
            return path
    return None


def installed_versions(site: pathlib.Path) -> dict[str, str]:
    """Distribution -> version of everything in a site folder (for the report)."""
    versions = {}
    for meta in sorted(site.glob("*.dist-info")):
        name, _, version = meta.name[: -len(".dist-info")].rpartition("-")
        versions[name] = version
    return versions
