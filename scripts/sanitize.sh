#!/usr/bin/env bash
# Checks the native core's locking rules with Clang, then builds and runs the native
# GoogleTest suite under sanitizers, one command:
#
#   bash scripts/sanitize.sh            # Clang thread-safety check (build/native-tsa), then
#                                       # ASan+UBSan (build/native-asan), then TSan (build/native-tsan)
#   bash scripts/sanitize.sh --asan     # only ASan+UBSan
#   bash scripts/sanitize.sh --tsan     # only TSan
#   bash scripts/sanitize.sh --thread-safety  # only the Clang thread-safety check
#   JOBS=4 bash scripts/sanitize.sh     # parallel build jobs (default: nproc)
#
# Extra arguments after `--` go to ctest (e.g. `-- -R SpscRing`). Exits non-zero if any
# configure, build or test step fails; every pass runs even if an earlier one fails.
#
# The first pass builds the core's libraries and the extension's binding with Clang (apt
# package clang), -Wthread-safety and every finding an error
# (-DPEAKLINE_THREAD_SAFETY_ERRORS=ON): the lock and GIL rules the code states as annotations
# (src/native/sync/thread_annotations.h) are checked there. The binding needs nanobind in the
# Python the build finds (PYTHON=venv/bin/python picks one).
# The sanitizer passes use the default compiler: Clang links its sanitizer runtime into each
# executable, where the tests that locate libc's code (code regions, symbol patcher, hooks)
# would find malloc and qsort.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run_asan=1
run_tsan=1
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --asan) run_tsan=0 ;;
    --tsan) run_asan=0 ;;
    --thread-safety) run_asan=0; run_tsan=0 ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)
PY_ARGS=()
[ -n "${PYTHON:-}" ] && PY_ARGS=(-DPython_EXECUTABLE="$("$PYTHON" -c 'import sys; print(sys.executable)')")

# Every report is fatal (UBSan only prints and continues by default, which ctest would count as
# a pass). Leak checking stays on, except where a test opts out (CPython's embedded runtime).
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

# The thread-safety check: Clang, the core's libraries and the binding (the analysis is at
# compile time: nothing runs).
thread_safety_pass() {
  local dir="build/native-tsa"
  printf '\n== thread safety: Clang -Werror=thread-safety in %s\n' "$dir"
  if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
    echo "sanitize.sh: needs clang and clang++ (Debian/Ubuntu: apt-get install clang)" >&2
    return 1
  fi
  if ! "${PYTHON:-python3}" -c 'import nanobind' >/dev/null 2>&1; then
    echo "sanitize.sh: the binding's check needs nanobind in ${PYTHON:-python3}" \
         "(pip install nanobind, or PYTHON=a venv's python)" >&2
    return 1
  fi
  cmake -S . -B "$dir" "${GENERATOR[@]}" "${PY_ARGS[@]}" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPEAKLINE_THREAD_SAFETY_ERRORS=ON \
    -DPEAKLINE_BUILD_TESTS=ON -DPEAKLINE_BUILD_EXTENSION=ON || return 1
  cmake --build "$dir" -j"$JOBS" --target peakline_base peakline_cpython _core || return 1
}

# pass NAME SANITIZERS
pass() {
  local dir="build/native-$1" san="$2"
  printf '\n== %s: -DPEAKLINE_SANITIZE=%s in %s\n' "$1" "$san" "$dir"
  # A sanitizer build is slow and timing-sensitive tests then see more scheduling noise;
  # RelWithDebInfo keeps it fast enough while keeping line numbers in reports.
  cmake -S . -B "$dir" "${GENERATOR[@]}" "${PY_ARGS[@]}" \
    -DPEAKLINE_BUILD_TESTS=ON -DPEAKLINE_SANITIZE="$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    || return 1
  cmake --build "$dir" -j"$JOBS" || return 1
  ctest --test-dir "$dir" --output-on-failure "${ctest_args[@]}" || return 1
}

failed=()
thread_safety_pass || failed+=(thread-safety)
if [ "$run_asan" = 1 ]; then pass asan address,undefined || failed+=(asan); fi
if [ "$run_tsan" = 1 ]; then pass tsan thread || failed+=(tsan); fi

if [ ${#failed[@]} -gt 0 ]; then
  printf '\n== sanitizer passes FAILED: %s\n' "${failed[*]}"
  exit 1
fi
printf '\n== sanitizer passes OK\n'
