#!/usr/bin/env bash
# test.sh - set up, build, and run every test: once in a normal build, once under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
run_suite() { # build-dir, extra cmake args...
	local dir=$1
	shift
	cmake -S . -B "$dir" -DBUILD_TESTING=ON "$@" >/dev/null
	cmake --build "$dir" -j"$jobs"
	ctest --test-dir "$dir" --output-on-failure --timeout 300 -j1
}
echo "== normal build =="
run_suite build
if [ "${URNIC_SKIP_SANITIZE:-0}" != 1 ]; then
	echo "== ASan + UBSan build =="
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_suite build-asan -DURNIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
fi
