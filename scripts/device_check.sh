#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: the tests, the ladder, Nsight Compute profiles and compute-sanitizer. Each
# step's output goes to a file in $OUT (default: out/ in the project); the first step that fails stops the run,
# named on stderr, with a non-zero exit.
#
#   scripts/device_check.sh                                     # every stage: tests ladder profile sanitizer
#   scripts/device_check.sh ladder profile                      # some of them, in this order
#   LADDER_OPTIONS="--warmup 20" scripts/device_check.sh ladder # more options for every ladder run
#
# Files: tests.txt, ladder.txt, headline.json, causal.json, sweep.json, decode.json, profile.txt, profile.json,
# sanitizer.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
PYTHON=${PYTHON:-python3}
LADDER_OPTIONS=${LADDER_OPTIONS:-}
SWEEP=512,1024,2048,4096,8192,16384
PROFILED="5 6 7 8 9 10 11 12 13 14 15 16 fa2 cudnn"
SANITIZER_TOOLS="memcheck racecheck synccheck"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

# step NAME LOG COMMAND...: run COMMAND, its output added to $OUT/LOG; where it fails, name the step and stop.
step() {
    local name=$1 log=$OUT/$2
    shift 2
    echo "== $name: $*" | tee -a "$log"
    "$@" >>"$log" 2>&1
    local status=$?
    if [ "$status" -ne 0 ]; then
        tail -n 20 "$log" >&2
        echo "device_check: step '$name' failed (exit $status), its output is in $log" >&2
        exit "$status"
    fi
}

stage_tests() {
    step "GPU" tests.txt nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
    step "versions" tests.txt "$PYTHON" -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
    step "tests" tests.txt "$PYTHON" -m pytest -q -n auto  # the README's test command
    tail -n 1 "$OUT/tests.txt"
}

stage_ladder() {
    # shellcheck disable=SC2086  # LADDER_OPTIONS is a list of words
    step "ladder" ladder.txt "$PYTHON" runner.py --json "$OUT/headline.json" $LADDER_OPTIONS
    # shellcheck disable=SC2086
    step "ladder, causal" ladder.txt "$PYTHON" runner.py --causal --json "$OUT/causal.json" $LADDER_OPTIONS
    # shellcheck disable=SC2086
    step "ladder, sweep" ladder.txt "$PYTHON" runner.py --seq-len "$SWEEP" --warmup 3 --repeats 10 \
        --json "$OUT/sweep.json" $LADDER_OPTIONS
    # shellcheck disable=SC2086
    step "ladder, decode" ladder.txt "$PYTHON" runner.py decode --json "$OUT/decode.json" $LADDER_OPTIONS
}

stage_profile() {
    # shellcheck disable=SC2086  # PROFILED is a list of words
    step "profile" profile.txt "$PYTHON" runner.py profile $PROFILED --json "$OUT/profile.json"
}

stage_sanitizer() {
    for tool in $SANITIZER_TOOLS; do  # every chapter, causal and full, at a ragged shape (see scripts/sanitize.py)
        # --report-api-errors no: cuda-bindings (the TMA chapters' tensor maps) probes the driver for entry points
        # that may not exist; memcheck would count each failed probe, none of which touches a kernel's memory.
        step "compute-sanitizer $tool" sanitizer.txt \
            compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 1 "$PYTHON" scripts/sanitize.py
    done
}

stages=${*:-tests ladder profile sanitizer}
for stage in $stages; do
    case $stage in
        tests | ladder | profile | sanitizer) "stage_$stage" ;;
        *)
            echo "device_check: no stage '$stage'; the stages are tests, ladder, profile, sanitizer" >&2
            exit 2
            ;;
    esac
done
echo "device_check: every step passed ($stages)"
