#!/usr/bin/env bash
# Engine benchmarks (issue 3): latency vs PyTorch and FC bandwidth vs triad (engine_bench), the
# FC kernel choice (fc_bench), interference of 1..4 concurrent requests (interference_bench).
# Builds build/ first. Extra args go to engine_bench (e.g. --models cifar10 --repeat 30).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SERF_BUILD_DIR:-$root/build}"
cmake --build "$build" -j2 --target engine_bench fc_bench interference_bench >/dev/null
echo "== engine_bench"; "$build/bin/engine_bench" --root "$root" "$@"
echo; echo "== fc_bench"; "$build/bin/fc_bench"
echo; echo "== interference_bench"; "$build/bin/interference_bench" --root "$root"
