#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine (no network): unpacks the wheel that scripts/build-python-wheel.sh left in
# .gpu-python/ into build/python-site (pytest too, from .gpu-python/test-deps, where the
# machine has none), then runs the Python package's tests and/or benchmarks there with the
# machine's own PyTorch and CuPy. Results (JSON) go to $OUT when set, else build/python-results.
#   usage: scripts/gpu-python.sh [tests|bench|corpus|all]
# corpus: issue 19's launch check (scripts/corpus-launch-check.py): torch.compile'd model blocks
# with every Triton launch replaced by kcache's, against PyTorch's own results.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
python=${KCACHE_PYTHON:-python3}
site=$PWD/build/python-site
results=${OUT:-$PWD/build/python-results}
wheels=(.gpu-python/kcache-*.whl)
if [ ! -f "${wheels[0]}" ]; then
  echo "gpu-python: no wheel in .gpu-python (run scripts/build-python-wheel.sh, carry .gpu-python)" >&2
  exit 1
fi
rm -rf "$site" && mkdir -p "$site" "$results"
# A wheel is a zip laid out as site-packages: unpacking installs it without pip or a network.
"$python" -m zipfile -e "${wheels[0]}" "$site"
if ! "$python" -c 'import pytest' 2>/dev/null; then
  for w in .gpu-python/test-deps/*.whl; do "$python" -m zipfile -e "$w" "$site"; done
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
"$python" -c 'import kcache, sys; print("kcache", kcache.__version__, "from", kcache.__file__, "on Python", sys.version.split()[0])'
status=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  "$python" -m pytest -v -p no:cacheprovider bindings/python/tests 2>&1 | tee "$results/python-tests.txt" || status=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  "$python" bindings/python/bench/launch_overhead.py --json "$results/python-launch-overhead.json" || status=1
  "$python" bindings/python/bench/warm_process.py --json "$results/python-warm-process.json" || status=1
fi
if [ "$what" = corpus ] || [ "$what" = all ]; then
  "$python" scripts/corpus-launch-check.py --json "$results/corpus-launch-check.json" 2>&1 | tee "$results/corpus-launch-check.txt" || status=1
fi
exit "$status"
