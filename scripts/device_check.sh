#!/usr/bin/env bash
# On the GPU machine: every test, the ladder (headline, causal, sweep), profiles, the sanitizer.
# `device_check.sh` runs all of it; `device_check.sh ladder` the first two, `device_check.sh profile` the rest.
# Everything lands in $OUT (or ./out): at most 8 files, as the device tool returns.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
    python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
} > "$OUT/gpu.txt" 2>&1
if [ "${1:-all}" != profile ]; then
    python3 -m pytest -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1  # the README's test command: every test
    tail -3 "$OUT/pytest.log"
    {
        python3 runner.py --json "$OUT/headline.json"
        python3 runner.py --causal --json "$OUT/causal.json"
        python3 runner.py --seq-len 512,1024,2048,4096,8192,16384 --warmup 3 --repeats 10 --json "$OUT/sweep.json"
    } > "$OUT/ladder.txt" 2>&1
    grep -E "k0|torch|batch" "$OUT/ladder.txt" | head -60
fi
if [ "${1:-all}" != ladder ]; then
    for chapter in 5 6 7 8 9; do
        python3 runner.py profile $chapter
    done > "$OUT/profile.txt" 2>&1
    cat "$OUT/profile.txt"
    for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool python3 scripts/sanitize.py 5 6 7 8 9 2>&1 | tail -2
    done > "$OUT/sanitizer.txt"
    cat "$OUT/sanitizer.txt"
fi
