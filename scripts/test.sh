#!/usr/bin/env bash
# test.sh - set up, build, and run every test: in a normal build (which includes a subset under
# valgrind memcheck), against Linux rdma_rxe in a qemu guest, under ASan+UBSan, and under TSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
run_suite() { # build-dir, extra cmake args...
	local dir=$1
	shift
	cmake -S . -B "$dir" -DBUILD_TESTING=ON "$@" >/dev/null
	cmake --build "$dir" -j"$jobs"
	ctest --test-dir "$dir" --output-on-failure --timeout 300 -j1 "${CTEST_ARGS[@]}"
}
CTEST_ARGS=()
echo "== normal build =="
run_suite build
if [ "${URNIC_SKIP_INTEROP:-0}" != 1 ]; then
	echo "== interop: urnic against the kernel's rdma_rxe in a qemu guest (tests/interop) =="
	# Builds the guest image on first use (debootstrap from Debian's mirror, cached in
	# /var/cache/urnic-interop); 77 means this machine cannot run the guest, and says why.
	rc=0
	bash tests/interop/run.sh build || rc=$?
	if [ $rc = 77 ]; then
		echo "interop SKIPPED: this machine cannot run the guest (reason above)"
	elif [ $rc != 0 ]; then
		echo "interop FAILED (logs and captures in build/interop)"
		exit $rc
	fi
fi
if [ "${URNIC_SKIP_SANITIZE:-0}" != 1 ]; then
	echo "== ASan + UBSan build =="
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_suite build-asan -DURNIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
fi
if [ "${URNIC_SKIP_TSAN:-0}" != 1 ]; then
	echo "== TSan build =="
	# The fault-injected (lossy) runs move 64 MiB through a lossy link: under TSan's slowdown they
	# outlast their bounds. The scripted-responder tests (label "scripted") teach the requester
	# round trips of 5 to 60 ms against a 10 ms first timer: under TSan a warm-up ACK can arrive
	# after the timer (rc_read_slices failed so in a CI run). The normal and ASan builds run both.
	CTEST_ARGS=(-LE "lossy|scripted")
	run_suite build-tsan -DURNIC_TSAN=ON -DCMAKE_BUILD_TYPE=Debug
fi
if [ "${URNIC_SKIP_FUZZ:-0}" != 1 ]; then
	echo "== fuzz: the receive path under libFuzzer, 60 s =="
	bash scripts/fuzz.sh 60
fi
