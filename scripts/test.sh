#!/usr/bin/env bash
# Install what the tests need and run them all: the C++ unit tests (GoogleTest via ctest) and
# the Python tests (pytest). Works on a fresh Debian/Ubuntu machine as root; elsewhere it only
# installs system packages that are missing, with sudo if it has to.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh -k examples  # extra arguments go to pytest
#   PYTHON=python3.12 bash scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')
JOBS=$(nproc 2>/dev/null || echo 2)

# Each step is stamped with the clock and the seconds since the script started: where CI's
# time goes, read from its log.
log() { printf '\n== %s (%s, +%ss)\n' "$*" "$(date -u +%H:%M:%S)" "$SECONDS"; }

# --- system packages (only what is missing) -------------------------------------------------
missing=()
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
if ! [ -f /usr/include/gtest/gtest.h ]; then missing+=(libgtest-dev); fi
# The HTML report is tested in a real browser: Debian's chromium driven by Playwright from PyPI
# (never `playwright install`, which downloads a browser build).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# The validation server is tested against a real PostgreSQL (a private cluster per test run).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)   # the live view is read through a real terminal
[ -x /usr/bin/time ] || missing+=(time)   # the benchmark harness reads a program's peak RSS with it
# A profiled program that dies of a fault dumps core; the tests print its native backtrace.
command -v gdb >/dev/null 2>&1 || missing+=(gdb)
command -v ccache >/dev/null 2>&1 || missing+=(ccache)   # the core is built once per Python
# CPython 3.14/3.15 come from a Debian forky root made with debootstrap (as root only).
if [ "$(id -u)" -eq 0 ] && [ -n "${PEAKLINE_CHROOT_PYTHONS-3.14 3.15}" ]; then
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing system packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The core is built for every CPython below: through ccache, its Python-independent half (the
# hooks, samplers, transport, attach) compiles once (a build for a second version: 33 s -> 14 s
# here). Paths below the checkout are hashed relative to it.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD"
fi

# --- CPython 3.14 and 3.15: their Debian root is made (or reused) in the background ----------
# debootstrap and apt are mostly downloads: they run while the suites below do, and the
# measuring tests on those versions run at the end (scripts/test-all-pythons.sh).
chroot_prepare=""
chroot_log=$(mktemp "${TMPDIR:-/tmp}/peakline-forky.XXXXXX")
if [ "$(id -u)" -eq 0 ] && [ -n "${PEAKLINE_CHROOT_PYTHONS-3.14 3.15}" ]; then
  bash scripts/test-all-pythons.sh prepare >"$chroot_log" 2>&1 &
  chroot_prepare=$!
fi

# --- the package and the test dependencies --------------------------------------------------
# A regular (non-editable) install: the tests import the installed package, with its compiled
# extension, never ./src (pytest runs from the repo root, where no peakline/ folder exists).
# Third-party versions are pinned (constraints/test.txt), refreshed on purpose only.
# With its symbol table: it names the core's functions in a crash's backtrace
# (tests/python/peakline_proc.py); the code is the release build's.
log "pip install '.[test]' with $PYTHON"
"$PYTHON" -m pip install --disable-pip-version-check -c constraints/test.txt \
  --config-settings=cmake.define.PEAKLINE_KEEP_SYMBOLS=ON --config-settings=install.strip=false \
  '.[test]'

# --- C++ unit tests ---------------------------------------------------------------------------
if [ -f tests/native/CMakeLists.txt ] && ls tests/native/*.cc >/dev/null 2>&1; then
  log "C++ unit tests"
  # Debug (-O0, assertions on): builds in 56 s here against RelWithDebInfo's 86 s, and the
  # tests' checks run with the core's own assertions.
  cmake -S . -B build/native-tests -DPEAKLINE_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Debug \
    -DPython_EXECUTABLE="$PYTHON"
  cmake --build build/native-tests -j"$JOBS"
  ctest --test-dir build/native-tests --output-on-failure
else
  log "no C++ unit tests yet (tests/native/*.cc); skipped"
fi

# --- Python tests -----------------------------------------------------------------------------
status=0
# pytest exit status 5 (no test collected, e.g. a -k that selects none here) is no failure.
run_pytest() {
  local rc=0
  "$PYTHON" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests here; treating as success"
  elif [ "$rc" -ne 0 ]; then
    status=$rc
  fi
}
# Files whose tests measure no time (the model and its readers, reports in a browser, gates,
# the server): two at a time, one file per worker (module fixtures stay whole). Everything
# else — CPU and memory accuracy, threads, attach, children, distributed, the live view —
# runs after them alone on the machine, as CPU figures must.
two_at_a_time=(tests/python/test_gates_pytest.py tests/python/test_gates_check.py
  tests/python/test_gates_compare.py tests/python/test_server_durability.py
  tests/python/test_server_api.py tests/python/test_server_ui.py
  tests/python/test_server_planner.py tests/python/test_html.py tests/python/test_html_polish.py
  tests/python/test_view.py tests/python/test_model.py tests/python/test_reader_fuzz.py
  tests/python/test_speedscope.py tests/python/test_format_spec.py tests/python/test_builder.py
  tests/python/test_terminal.py tests/python/test_cli_options.py tests/python/test_cli_habits.py
  tests/python/test_run_options.py tests/python/test_sweep_fit.py)
alone=()
for f in "${two_at_a_time[@]}"; do alone+=(--ignore="$f"); done
log "Python tests that measure no time, two at a time"
# --durations: the slowest tests, in the log, so that the suite's time stays watched.
run_pytest -q -n 2 --dist loadfile --durations=10 "${two_at_a_time[@]}" "$@"
log "Python tests"
run_pytest tests/python -q --durations=20 "${alone[@]}" "$@"

# --- Other CPython versions -------------------------------------------------------------------
# The core reads version-specific interpreter structures: build it for every supported
# CPython found here (pyenv) and run the measuring tests (CPU, memory, CLI, API, children, the
# refusal of other interpreters) on each. Set
# PEAKLINE_OTHER_PYTHONS="" to skip, or to a list of interpreters.
if [ -z "${PEAKLINE_OTHER_PYTHONS+x}" ]; then
  PEAKLINE_OTHER_PYTHONS=""
  for v in 3.10 3.12 3.13; do
    for candidate in "$HOME"/.pyenv/versions/$v.*/bin/python "$(command -v python$v || true)"; do
      if [ -x "$candidate" ] && [ "$candidate" != "$PYTHON" ]; then
        PEAKLINE_OTHER_PYTHONS="$PEAKLINE_OTHER_PYTHONS $candidate"
        break
      fi
    done
  done
fi
# Each runs in a throwaway virtual environment: the machine's other interpreters stay as
# they were.
for other in $PEAKLINE_OTHER_PYTHONS; do
  log "build and core tests with $other"
  venv=$(mktemp -d "${TMPDIR:-/tmp}/peakline-test-venv.XXXXXX")
  # A version whose wheels the main pins do not cover has its own pins (3.10: numpy < 2.3).
  pins=constraints/test.txt
  version=$("$other" -c 'import sys; print("%d%d" % sys.version_info[:2])')
  if [ -f "constraints/test-py$version.txt" ]; then pins=constraints/test-py$version.txt; fi
  # The measuring subset on each: CPU split and threads, the memory figures, the API, the
  # refusal of other interpreters, pool workers. 3.10, the oldest (its own frame layout, no
  # Py_Version, the ptrace injector's version probe), also runs the CLI, the model and attach;
  # 3.12 and 3.13 sit between versions that run those (3.11 here, 3.14 and 3.15 below).
  tests=(tests/python/test_cpu_accuracy.py tests/python/test_memory_accuracy.py
    tests/python/test_api.py tests/python/test_interpreter_support.py
    "tests/python/test_processes.py::test_pool_workers_work_shows_on_the_worker_function_lines[spawn]")
  if [ "$version" = 310 ]; then
    # Attach: the 20-cycle test and the injector's run over every interpreter are the default
    # Python's (the latter covers 3.10).
    tests+=(tests/python/test_cli_run.py tests/python/test_model.py tests/python/test_attach.py
      --deselect tests/python/test_attach.py::test_twenty_attach_detach_cycles_leave_output_exit_status_throughput_and_memory
      -k "not test_the_injector_runs_code_in_every_supported_cpython")
  fi
  if "$other" -m venv "$venv" &&
     "$venv/bin/python" -m pip install --disable-pip-version-check -q -c "$pins" \
       . pytest hypothesis numpy; then
    "$venv/bin/python" -m pytest -q "${tests[@]}" \
      || status=1
  else
    status=1
  fi
  rm -rf "$venv"
done

# --- CPython 3.14 and 3.15 (Debian forky root) -----------------------------------------------
if [ -n "$chroot_prepare" ]; then
  log "CPython ${PEAKLINE_CHROOT_PYTHONS-3.14 3.15} in a Debian forky root"
  wait "$chroot_prepare" || true  # its output follows; run prepares again if it failed
  cat "$chroot_log"
  bash scripts/test-all-pythons.sh run || status=1
elif [ -n "${PEAKLINE_CHROOT_PYTHONS-3.14 3.15}" ]; then
  log "CPython 3.14/3.15 not tested: making their Debian root needs root"
fi
rm -f "$chroot_log"
exit "$status"
