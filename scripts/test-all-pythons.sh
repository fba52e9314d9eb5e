#!/usr/bin/env bash
# Build peakline for the CPython versions this machine's own distribution does not have (3.14
# and 3.15: Debian's testing suite, "forky") and run the measuring tests on each, inside a
# Debian forky root entered with chroot. Needs root (debootstrap, chroot, mounts).
#
#   bash scripts/test-all-pythons.sh prepare     # make the root, or reuse it (network-bound)
#   bash scripts/test-all-pythons.sh run [ARGS]  # prepare if needed, then build and test;
#                                                # ARGS go to pytest
#   bash scripts/test-all-pythons.sh bench       # peakline's overhead on the pure-Python
#                                                # micro set on each version (not in CI: ~6
#                                                # min a version, on an otherwise idle machine);
#                                                # reports in benchmarks/results/python-3.X*
#
# PEAKLINE_FORKY_ROOT      where the root lives and is kept between runs
#                          (default /var/cache/peakline/forky, outside the checkout)
# PEAKLINE_CHROOT_PYTHONS  the versions to test (default "3.14 3.15")
# PEAKLINE_PY314T          a free-threaded CPython 3.14 built by scripts/build-free-threaded.sh
#                          (default /var/cache/peakline/py314t): where it is, `run` also runs
#                          the CPU subset on it (FREE_THREADED_TESTS); where not, it says so
#
# scripts/test.sh starts `prepare` in the background first thing and `run` at its end, so
# debootstrap and apt download while the main suite runs. Every mount lives in a private
# mount namespace (unshare), so an interrupted run leaves nothing mounted; each version gets
# a throwaway virtual environment and a fresh copy of the checkout inside the root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ROOT=${PEAKLINE_FORKY_ROOT:-/var/cache/peakline/forky}
PY314T=${PEAKLINE_PY314T:-/var/cache/peakline/py314t}
VERSIONS=${PEAKLINE_CHROOT_PYTHONS-3.14 3.15}
SUITE=forky
# The measuring subset: CPU split and threads 4:2:1, the 200 MB line, peak, leak vs cache,
# copies, children, the CLI and the API (the full suite runs on the default Python), and
# attach (sys.remote_exec on 3.14+: tracer and target both run inside the root), with its
# 20 attach/detach cycles.
TESTS=(tests/python/test_cpu_accuracy.py tests/python/test_memory_accuracy.py
       tests/python/test_cli_run.py tests/python/test_api.py tests/python/test_model.py
       "tests/python/test_processes.py::test_pool_workers_work_shows_on_the_worker_function_lines"
       "tests/python/test_processes.py::test_process_executor_subprocess_and_fork_keep_results_and_exit_codes"
       tests/python/test_attach.py)
# On the free-threaded build: CPU time only (the memory tests skip themselves there).
FREE_THREADED_TESTS=(tests/python/test_cpu_accuracy.py tests/python/test_free_threaded.py
       tests/python/test_cli_run.py tests/python/test_api.py tests/python/test_model.py
       "tests/python/test_processes.py::test_pool_workers_work_shows_on_the_worker_function_lines"
       "tests/python/test_processes.py::test_process_executor_subprocess_and_fork_keep_results_and_exit_codes")
# Third-party packages the subset uses (numpy: the 200 MB line, native time); one without a
# wheel for a version skips only the tests that import it (pytest.importorskip), and this
# script says so. pandas is not among them: no test of the subsets imports it.
OPTIONAL_PACKAGES=(numpy)

# Each step is stamped with the clock and the seconds since the script started: where CI's
# time goes, read from its log.
log() { printf '\n== %s (%s, +%ss)\n' "$*" "$(date -u +%H:%M:%S)" "$SECONDS"; }

packages() {
  local v list="g++ cmake ccache"
  for v in $VERSIONS; do list="$list python$v-dev python$v-venv"; done
  echo "$list"
}

# The Debian mirror this machine's apt uses (deb822 "URIs:" or one-line "deb URI suite").
mirror() {
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
          2>/dev/null | awk '/^URIs:/ {print $2} /^deb / {print ($2 ~ /^\[/ ? $3 : $2)}' |
        grep -v -e security -e '^file:' | head -n 1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

# Runs a command in the root with /proc and /dev mounted, in a private mount namespace (and
# the cached free-threaded interpreter, if any, at /opt/py314t).
in_root() {
  unshare --mount --propagation private -- /bin/sh -c '
    root=$1 ft=$2; shift 2
    mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" &&
    { [ ! -x "$ft/bin/python3.14t" ] ||
      { mkdir -p "$root/opt/py314t" && mount --bind "$ft" "$root/opt/py314t"; }; } &&
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 \
      PIP_CERT=/etc/ssl/host-ca-certificates.crt SSL_CERT_FILE=/etc/ssl/host-ca-certificates.crt \
      PYTHONDONTWRITEBYTECODE=1 "$@"' sh "$ROOT" "$PY314T" "$@"
}

prepare() {
  [ -n "$VERSIONS" ] || return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "test-all-pythons: needs root (debootstrap, chroot); skipped" >&2
    return 1
  fi
  mkdir -p "$(dirname "$ROOT")"
  exec 9>"$ROOT.lock"
  flock 9   # one prepare at a time (test.sh's background one and a run)
  local wanted
  wanted=$(packages)
  if [ -f "$ROOT/.peakline-ready" ] && [ "$(cat "$ROOT/.peakline-ready")" = "$wanted" ]; then
    echo "test-all-pythons: reusing $ROOT"
    return 0
  fi
  if ! [ -x "$ROOT/usr/bin/apt-get" ]; then
    command -v debootstrap >/dev/null 2>&1 ||
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
    log "debootstrap $SUITE into $ROOT from $(mirror)"
    rm -rf "$ROOT.partial"
    # The host's debootstrap may predate forky: sid's script builds any Debian suite.
    debootstrap --variant=minbase "$SUITE" "$ROOT.partial" "$(mirror)" \
      /usr/share/debootstrap/scripts/sid
    mv "$ROOT.partial" "$ROOT"
  fi
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  # pip inside the root reaches PyPI with the host's certificate authorities (the root's own
  # bundle does not know a proxy's).
  mkdir -p "$ROOT/etc/ssl"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/host-ca-certificates.crt"
  log "apt-get install $wanted (in $ROOT)"
  # Check-Valid-Until: a mirror snapshot's Release file may be past its validity date.
  in_root /bin/sh -c "apt-get -q -o Acquire::Check-Valid-Until=false update &&
    apt-get -q -y -o Acquire::Check-Valid-Until=false install --no-install-recommends $wanted"
  echo "$wanted" > "$ROOT/.peakline-ready"
}

# run_version LABEL PYTHON [pytest args]: PYTHON is the interpreter's command in the root.
run_version() {
  local v=$1 python=$2
  shift 2
  local work=/tmp/peakline-$v
  rm -rf "$ROOT$work"
  mkdir -p "$ROOT$work/src"
  # The checkout's files only (never its build folders or venvs).
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - |
      tar -xf - -C "$ROOT$work/src"
  else
    tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$ROOT$work/src"
  fi
  log "CPython $v: build peakline and run the measuring tests (in $ROOT)"
  in_root /bin/bash -c '
    set -u
    v=$1 python=$2 work=$3; shift 3
    cd "$work/src"
    # ccache, kept in the root: the versions share the core'"'"'s Python-independent half.
    if command -v ccache >/dev/null 2>&1; then
      export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache \
        CCACHE_DIR=/var/cache/ccache CCACHE_BASEDIR="$work/src"
    fi
    $python -VV
    $python -m venv "$work/venv" || exit 1
    py=$work/venv/bin/python
    $py -m pip install -q pytest hypothesis || exit 1
    for pkg in '"${OPTIONAL_PACKAGES[*]}"'; do
      $py -m pip install -q --only-binary=:all: "$pkg" >/dev/null 2>&1 ||
        echo "test-all-pythons: $pkg has no wheel for CPython $v here; the tests that need it are skipped"
    done
    $py -m pip install -q . || exit 1
    $py -m pytest -q -rs -p no:cacheprovider "$@"
  ' sh "$v" "$python" "$work" "$@"
  local status=$?
  rm -rf "$ROOT$work"
  return $status
}

run() {
  local v status=0
  if [ -n "$VERSIONS" ]; then
    prepare
    for v in $VERSIONS; do
      run_version "$v" "python$v" "${TESTS[@]}" "$@" || status=1
    done
  fi
  # Any prepared root has what 3.14t needs (its runtime libraries, g++, cmake).
  if [ -x "$PY314T/bin/python3.14t" ] && [ -f "$ROOT/.peakline-ready" ]; then
    run_version 3.14t /opt/py314t/bin/python3.14t "${FREE_THREADED_TESTS[@]}" "$@" || status=1
  else
    log "free-threaded CPython 3.14t not tested: not built here ($PY314T;" \
        "scripts/build-free-threaded.sh builds it)"
  fi
  return $status
}

# bench_version LABEL PYTHON: benchmarks/run_overhead.py with that interpreter (--no-venv: in a
# throwaway venv with peakline built there), CPU-only and full against the unprofiled program.
bench_version() {
  local v=$1 python=$2
  local work=/tmp/peakline-bench-$v
  rm -rf "$ROOT$work"
  mkdir -p "$ROOT$work/src" benchmarks/results
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - |
    tar -xf - -C "$ROOT$work/src"
  log "CPython $v: peakline's overhead on the micro set (in $ROOT)"
  in_root /bin/bash -c '
    set -u
    python=$1 work=$2 v=$3
    cd "$work/src"
    $python -m venv "$work/venv" && "$work/venv/bin/python" -m pip install -q . || exit 1
    "$work/venv/bin/python" benchmarks/run_overhead.py --no-venv \
      --tools plain,peakline,peakline-full --workloads nbody,fib,json_roundtrip,object_churn \
      --no-accuracy --no-cost --no-chart \
      --report "$work/python-$v.md" --json "$work/python-$v.json"
  ' sh "$python" "$work" "$v"
  local status=$?
  cp "$ROOT$work/python-$v.md" "$ROOT$work/python-$v.json" benchmarks/results/ 2>/dev/null
  rm -rf "$ROOT$work"
  return $status
}

bench() {
  local v status=0
  prepare
  for v in $VERSIONS; do
    bench_version "$v" "python$v" || status=1
  done
  if [ -x "$PY314T/bin/python3.14t" ]; then
    bench_version 3.14t /opt/py314t/bin/python3.14t || status=1
  fi
  return $status
}

# Sourced (scripts/build-free-threaded.sh): the functions only.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-run}" in
    prepare) prepare ;;
    run) shift || true; run "$@" ;;
    bench) bench ;;
    *) echo "usage: $0 [prepare|run [pytest args]|bench]" >&2; exit 2 ;;
  esac
fi
