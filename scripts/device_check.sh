#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, the ladder (headline, causal, sweep), profiles, the sanitizer.
# Everything lands in $OUT (or ./out): at most 8 files, as the device tool returns.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
    python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
} > "$OUT/gpu.txt" 2>&1
python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log"
{
    python3 runner.py --json "$OUT/headline.json"
    python3 runner.py --causal --json "$OUT/causal.json"
    python3 runner.py --seq-len 512,1024,2048,4096,8192,16384 --warmup 3 --repeats 10 --json "$OUT/sweep.json"
} > "$OUT/ladder.txt" 2>&1
grep -E "k0|torch|batch" "$OUT/ladder.txt" | head -60
python3 runner.py profile 5 > "$OUT/profile.txt" 2>&1
python3 runner.py profile 8 >> "$OUT/profile.txt" 2>&1
cat "$OUT/profile.txt"
for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool python3 scripts/sanitize.py 5 8 2>&1 | tail -2
done > "$OUT/sanitizer.txt"
cat "$OUT/sanitizer.txt"
