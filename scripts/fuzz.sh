#!/usr/bin/env bash
# fuzz.sh [SECONDS] - builds the libFuzzer target of the receive path (fuzz/fuzz_rx.c, clang with
# ASan and UBSan) in build-fuzz, writes its seed corpus (a valid packet of every opcode) and runs it
# for SECONDS (default 60) on one core. Fails on a crash, a sanitizer report, a hang over 5 s or a
# changed canary byte. The corpus grows in build-fuzz/corpus and is reused by the next run.
# Then scripts/fuzz_cov.sh replays corpus and seeds through a coverage build and reports the
# line, region and branch coverage of the receive path's sources (URNIC_FUZZ_COV=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DURNIC_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_rx
fz=build-fuzz
rm -rf "$fz/seeds" && mkdir -p "$fz/seeds" "$fz/corpus" "$fz/artifacts"
URNIC_FUZZ_SEEDS="$fz/seeds" "$fz/bin/fuzz_rx"
log="$fz/fuzz.log"
status=0
"$fz/bin/fuzz_rx" "$fz/corpus" "$fz/seeds" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$fz/artifacts/" >"$log" 2>&1 || status=$?
grep -E 'INITED|DONE' "$log" || true
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
echo "corpus: $(find "$fz/corpus" -type f | wc -l) inputs"
if [ "$status" -ne 0 ]; then
	echo "fuzz_rx failed (exit $status); the input is in $fz/artifacts/:" >&2
	grep -E -A30 'ERROR|runtime error|fuzz_rx: |Timeout|deadly signal' "$log" | head -60 >&2
	exit 1
fi
if [ "${URNIC_FUZZ_COV:-1}" != 0 ]; then
	bash scripts/fuzz_cov.sh "$fz/corpus" "$fz/seeds"
fi
