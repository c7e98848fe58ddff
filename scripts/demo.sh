#!/usr/bin/env bash
# demo.sh - the main job: set up, build, and run the two-process RDMA demo on the default device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
exec build/bin/urnic-demo "$@"
