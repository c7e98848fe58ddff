#!/usr/bin/env bash
# fuzz_cov.sh INPUT_DIR... - replays fuzz inputs (scripts/fuzz.sh's corpus and seeds) once each
# through a build of fuzz/fuzz_rx with clang's source-based coverage (build-fuzz-cov), and reports
# the line, region and branch coverage they reach in the receive path's sources (src/engine,
# src/net, src/wire, src/mem). The table is written to build-fuzz-cov/coverage.txt, the
# annotated sources to build-fuzz-cov/html/index.html. Needs clang and llvm (llvm-cov,
# llvm-profdata) from Debian.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
b=build-fuzz-cov
cmake -S . -B "$b" -DCMAKE_C_COMPILER=clang -DURNIC_FUZZ=ON -DURNIC_COVERAGE=ON >/dev/null
cmake --build "$b" -j"$(nproc)" --target fuzz_rx >/dev/null
rm -f "$b"/fuzz_rx.profraw "$b"/fuzz_rx.profdata
# -runs=0: every input is executed once while the corpus loads, then libFuzzer stops
LLVM_PROFILE_FILE="$b/fuzz_rx.profraw" "$b/bin/fuzz_rx" -runs=0 "$@" >"$b/replay.log" 2>&1 || {
	echo "fuzz_cov.sh: the replay failed (log in $b/replay.log)" >&2
	tail -20 "$b/replay.log" >&2
	exit 1
}
llvm-profdata merge -sparse "$b/fuzz_rx.profraw" -o "$b/fuzz_rx.profdata"
srcs=(src/engine src/net src/wire src/mem)
cov=(-instr-profile="$b/fuzz_rx.profdata" "$b/bin/fuzz_rx")
llvm-cov report "${cov[@]}" "${srcs[@]}" >"$b/coverage.txt"
llvm-cov show "${cov[@]}" -format=html -output-dir="$b/html" "${srcs[@]}" >/dev/null
inputs=$(grep -o 'INITED.*' "$b/replay.log" | head -n 1)
echo "coverage of ${srcs[*]} by the replay ($inputs); table in $b/coverage.txt:"
head -n 2 "$b/coverage.txt"
grep -E '^TOTAL' "$b/coverage.txt"
