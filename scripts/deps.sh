#!/usr/bin/env bash
# deps.sh - installs what urnic needs to build and test on Debian 12 (idempotent; root or sudo).
set -euo pipefail
PKGS=(cmake gcc make pkg-config libibverbs-dev ibverbs-utils perftest tshark iproute2 ethtool nftables valgrind
	ucx-utils libfabric-bin iperf3 gnuplot-nox time  # bench/compare.sh
	clang libclang-rt-14-dev llvm)  # scripts/fuzz.sh: libFuzzer; fuzz_cov.sh: llvm-cov
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
