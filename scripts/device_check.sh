#!/usr/bin/env bash
# One call on the GPU machine: tests, the ladder, conflicts, the sanitizer. Logs go to $OUT (or ./out).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" | tee -a "$OUT/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -40 > "$OUT/pytest.log"; tail -5 "$OUT/pytest.log"
python3 runner.py --json "$OUT/headline.json" 2>&1 | tee "$OUT/ladder.txt"
python3 runner.py --causal --json "$OUT/causal.json" 2>&1 | tee -a "$OUT/ladder.txt"
