#!/usr/bin/env bash
# Build a free-threaded CPython 3.14 (3.14t: ./configure --disable-gil, no PGO/LTO) inside the
# Debian forky root of scripts/test-all-pythons.sh, and keep it for later runs: that script
# runs the CPU subset of the tests on it whenever it is there. Needs root (chroot, mounts).
#
#   bash scripts/build-free-threaded.sh build    # build and cache it, unless already cached
#   bash scripts/build-free-threaded.sh status   # say whether it is cached (exit 0) or not (1)
#
# PEAKLINE_PY314T          where the built interpreter is kept (default /var/cache/peakline/py314t;
#                          its prefix inside the root is /opt/py314t, where test-all-pythons.sh
#                          mounts it)
# PEAKLINE_PY314T_SOURCE   a CPython 3.14 source tree to build from; by default Debian's
#                          python3.14 source package (apt-get source, in the root)
# PEAKLINE_FORKY_ROOT      the root (test-all-pythons.sh; prepared by it if missing)
#
# Not part of CI's run: on this project's shared 2-core machine this script's build took
# 563 s (configure, make -j2, install at nice 19 beside other work; 6.1 CPU-minutes in all),
# and the CPU subset on it another ~3 minutes: more than CI's budget leaves. CI tests on
# 3.14t only where the interpreter is already cached; a session builds it with this script
# when it can. pip and venv take their pip wheel from the root's
# python3-pip-whl (/usr/share/python-wheels), as Debian's own interpreters do.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/test-all-pythons.sh"   # the root, its lock, in_root

PY314T=${PEAKLINE_PY314T:-/var/cache/peakline/py314t}
PREFIX=/opt/py314t
# Enough of CPython's build dependencies for venv, pip (ssl, zlib) and the test suite's needs.
BUILD_DEPS="make pkg-config libssl-dev libffi-dev zlib1g-dev libbz2-dev liblzma-dev
            libsqlite3-dev libzstd-dev libreadline-dev libexpat1-dev uuid-dev dpkg-dev"

cached() { [ -x "$PY314T/bin/python3.14t" ] && [ -f "$PY314T/.peakline-ready" ]; }

build() {
  if cached; then
    echo "build-free-threaded: reusing $PY314T ($(head -n 1 "$PY314T/.peakline-ready"))"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || { echo "build-free-threaded: needs root (chroot); skipped" >&2; return 1; }
  PEAKLINE_CHROOT_PYTHONS=${PEAKLINE_CHROOT_PYTHONS-3.14 3.15} prepare
  exec 8>"$PY314T.lock"
  flock 8   # one build at a time
  local work=/usr/src/peakline-py314t
  rm -rf "${ROOT:?}$work"
  mkdir -p "$ROOT$work"
  log "build dependencies (in $ROOT)"
  in_root /bin/sh -c "apt-get -q -y -o Acquire::Check-Valid-Until=false install \
    --no-install-recommends $(echo $BUILD_DEPS)" >/dev/null
  if [ -n "${PEAKLINE_PY314T_SOURCE:-}" ]; then
    log "CPython source: $PEAKLINE_PY314T_SOURCE"
    cp -a "$PEAKLINE_PY314T_SOURCE/." "$ROOT$work/src"
  else
    log "CPython source: Debian's python3.14 source package"
    grep -q '^deb-src' "$ROOT/etc/apt/sources.list" 2>/dev/null ||
      sed -n 's/^deb /deb-src /p' "$ROOT/etc/apt/sources.list" >> "$ROOT/etc/apt/sources.list"
    if ! in_root /bin/sh -c "cd $work && apt-get -q -o Acquire::Check-Valid-Until=false update \
           >/dev/null && apt-get -q -o Acquire::Check-Valid-Until=false source python3.14"; then
      echo "build-free-threaded: Debian's python3.14 source package could not be fetched" \
           "(the mirror serves no source files?); set PEAKLINE_PY314T_SOURCE to a CPython 3.14" \
           "source tree" >&2
      rm -rf "${ROOT:?}$work"
      return 1
    fi
    mv "$ROOT$work"/python3.14-*/ "$ROOT$work/src"
  fi
  log "configure --disable-gil && make -j$(nproc) (in $ROOT)"
  local start=$SECONDS
  in_root /bin/sh -c "cd $work/src && ./configure -q --disable-gil --prefix=$PREFIX \
      --with-wheel-pkg-dir=/usr/share/python-wheels --with-ensurepip=install \
      >$work/configure.log 2>&1 &&
    make -j$(nproc) >$work/make.log 2>&1 && make install >$work/install.log 2>&1" || {
    echo "build-free-threaded: the build failed; its logs: $ROOT$work/*.log" >&2
    return 1
  }
  local took=$((SECONDS - start))
  # The interpreter lives outside the root, which test-all-pythons.sh may remake.
  rm -rf "$PY314T.partial"
  mkdir -p "$PY314T.partial"
  cp -a "$ROOT$PREFIX/." "$PY314T.partial/"
  rm -rf "$PY314T.partial"/lib/python3.14t/test   # CPython's own test suite: not needed
  in_root "$PREFIX/bin/python3.14t" -c 'import sys, sysconfig; print(sys.version.split()[0],
    "free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "GIL",
    sys._is_gil_enabled())' > "$PY314T.partial/.peakline-ready"
  echo "built in ${took}s" >> "$PY314T.partial/.peakline-ready"
  rm -rf "$PY314T"
  mv "$PY314T.partial" "$PY314T"
  rm -rf "${ROOT:?}$PREFIX" "${ROOT:?}$work"
  echo "build-free-threaded: $(head -n 1 "$PY314T/.peakline-ready"), built in ${took}s, kept in $PY314T"
}

case "${1:-build}" in
  build) build ;;
  status) if cached; then echo "build-free-threaded: cached in $PY314T"; else
            echo "build-free-threaded: not cached ($PY314T)"; exit 1; fi ;;
  *) echo "usage: $0 [build|status]" >&2; exit 2 ;;
esac
