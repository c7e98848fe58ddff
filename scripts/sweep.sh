#!/usr/bin/env bash
# sweep.sh - runs one RC test under the fault injector for a range of seeds and reports every
# seed that fails, with the test's own failure line. A lossy test in CI runs one seed; a bug that
# one seed in thirty shows (a READ's slice landing a slice early took seed 188) is found by
# sweeping, then replayed with the seed that shows it.
#
# Usage (from the repo root, after a build):
#   bash scripts/sweep.sh TEST FIRST LAST [PROFILE]
#     TEST     a binary of BUILD/bin (rc_read, rc_write, rc_send, rc_ordering, rc_sge, ...)
#     PROFILE  URNIC_FAULT without the seed; default CI's lossy one
# Environment: BUILD (default build), URNIC_TEST_PATH (default udp; shm for the rings),
#   SWEEP_TIMEOUT (seconds per run, default 120).
# Exit: 0 no seed failed, 1 some did.
set -uo pipefail

test=${1:?usage: sweep.sh TEST FIRST LAST [PROFILE]}
first=${2:?FIRST seed}
last=${3:?LAST seed}
profile=${4:-drop=0.02,dup=0.01,reorder=0.02,corrupt=0.005}
bin=${BUILD:-build}/bin/$test
[ -x "$bin" ] || { echo "sweep.sh: no $bin (build first)" >&2; exit 2; }

fails=0
for seed in $(seq "$first" "$last"); do
	out=$(URNIC_TEST_PATH=${URNIC_TEST_PATH:-udp} URNIC_FAULT="$profile,seed=$seed" \
		timeout "${SWEEP_TIMEOUT:-120}" "$bin" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		fails=$((fails + 1))
		echo "$test seed $seed: exit $rc: $(grep -m1 -i fail <<<"$out")"
	fi
done
echo "$test: seeds $first..$last under $profile: $fails failed"
[ $fails -eq 0 ]
