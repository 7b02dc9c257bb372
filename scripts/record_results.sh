#!/usr/bin/env bash
# Re-record the files in results/ that the pages quote, on a machine with an NVIDIA H200, each with the command
# its file records (a run's environment.command, a profile's command), then regenerate the pages from them.
#
#   scripts/record_results.sh                                # every file below, in this order
#   scripts/record_results.sh headline.json causal.json      # some of them
#   PYTHON=python3 scripts/record_results.sh peak.json        # another interpreter
#
# A new run records the sha256 of every kernel source it measured (environment.sources; a text file, a
# "# sources:" line from kernels/tools/sources.py), so tests/test_results_cpu.py can tell when a file no longer
# describes the kernels in the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python() { command "$PYTHON" "$@"; }  # the commands below read as the files record them (command: not this function)

# merge FILE PART...: the runs of several `runner.py --json` files, in order, as one file.
merge() {
    local file=$1
    shift
    python -c 'import json, sys; runs = [run for part in sys.argv[2:] for run in json.load(open(part))]
open(sys.argv[1], "w").write(json.dumps(runs, indent=1) + "\n")' "$file" "$@"
}

# sanitize LABEL CHAPTERS...: compute-sanitizer's three tools on chapters at a ragged shape (scripts/sanitize.py).
sanitize() {
    echo "# compute-sanitizer: chapters $* at (batch 2, seq 333, heads 2, bf16), causal and full, decoding, a split tail, and over 8,200 keys, full and causal (scripts/sanitize.py)"
    python -m kernels.tools.sources "$@"
    for tool in memcheck racecheck synccheck; do
        echo "## $tool: compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 python scripts/sanitize.py $*"
        compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 1 "$PYTHON" scripts/sanitize.py "$@" 2>&1
    done
}

record() {
    case $1 in
    headline.json) python runner.py --rounds 7 --json results/headline.json ;;
    causal.json) python runner.py --causal --rounds 7 --json results/causal.json ;;
    headline_k14_to_k16.json) python runner.py --kernels 14,15,16 --rounds 9 --json results/headline_k14_to_k16.json ;;
    causal_k14_to_k16.json) python runner.py --causal --kernels 14,15,16 --rounds 9 --json results/causal_k14_to_k16.json ;;
    fp16.json) python runner.py --dtype fp16 --kernels 8,9,10,11,12,13,14,15,16 --rounds 5 --json results/fp16.json ;;
    gqa.json) python runner.py --kv-heads 8 --kernels 8,12,15,16 --rounds 5 --json results/gqa.json ;;
    kv_cache.json)
        python runner.py --seq-len 1024 --kv-len 4096 --causal --kernels 8,12,15,16 --rounds 5 --json results/kv_cache.json
        ;;
    fa4_k14_to_k16.json) # FlashAttention-4 (requirements-fa4.txt) beside chapters 14-16 at four shapes
        python runner.py --kernels 14,15,16 --rounds 5 --json "$TMP/fa4_headline.json"
        python runner.py --kernels 14,15,16 --rounds 5 --causal --json "$TMP/fa4_causal.json"
        python runner.py --kernels 14,15,16 --rounds 5 --batch 64 --seq-len 1024 --json "$TMP/fa4_1024.json"
        python runner.py --kernels 14,15,16 --rounds 5 --batch 4 --seq-len 16384 --json "$TMP/fa4_16384.json"
        merge results/fa4_k14_to_k16.json "$TMP"/fa4_{headline,causal,1024,16384}.json
        ;;
    fa4_k16_k19.json) # FlashAttention-4 beside chapters 16 and 19 at the same four shapes, for the ratio to it
        python runner.py --kernels 16,19 --rounds 5 --json "$TMP/fa4_headline.json"
        python runner.py --kernels 16,19 --rounds 5 --causal --json "$TMP/fa4_causal.json"
        python runner.py --kernels 16,19 --rounds 5 --batch 64 --seq-len 1024 --json "$TMP/fa4_1024.json"
        python runner.py --kernels 16,19 --rounds 5 --batch 4 --seq-len 16384 --json "$TMP/fa4_16384.json"
        merge results/fa4_k16_k19.json "$TMP"/fa4_{headline,causal,1024,16384}.json
        ;;
    decode.json) python runner.py decode --rounds 5 --json results/decode.json ;;
    nvrtc_13_4.json) # kernels 16 and 20 built by NVRTC 13.0 (requirements.txt) and by 13.4, the ptxas release
        # FlashAttention-4's DSL embeds, in alternating runs. NVRTC_WHEEL: a downloaded wheel, for a machine offline.
        python -m pip install -q --no-deps --target "$TMP/nvrtc" "${NVRTC_WHEEL:-nvidia-cuda-nvrtc==13.4.*}"
        nvrtc_13_4() { LD_PRELOAD="$TMP/nvrtc/nvidia/cu13/lib/libnvrtc.so.13" "$@"; }
        python runner.py --kernels 16,20 --rounds 3 --json "$TMP/nvrtc_13_0_1.json"
        nvrtc_13_4 python runner.py --kernels 16,20 --rounds 3 --json "$TMP/nvrtc_13_4_1.json"
        python runner.py --kernels 16,20 --rounds 3 --json "$TMP/nvrtc_13_0_2.json"
        nvrtc_13_4 python runner.py --kernels 16,20 --rounds 3 --json "$TMP/nvrtc_13_4_2.json"
        merge results/nvrtc_13_4.json "$TMP"/nvrtc_13_{0_1,4_1,0_2,4_2}.json
        ;;
    fa4_clocks.json) # FlashAttention-4 beside chapters 16 and 20 at the four shapes, with each one's SM clock and power
        python runner.py --kernels 16,20 --rounds 5 --clocks --json "$TMP/clocks_headline.json"
        python runner.py --kernels 16,20 --rounds 5 --clocks --causal --json "$TMP/clocks_causal.json"
        python runner.py --kernels 16,20 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/clocks_1024.json"
        python runner.py --kernels 16,20 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/clocks_16384.json"
        merge results/fa4_clocks.json "$TMP"/clocks_{headline,causal,1024,16384}.json
        ;;
    fa4_k21.json) # FlashAttention-4 beside chapters 16, 20 and 21 at the four shapes, with each one's SM clock and power
        python runner.py --kernels 16,20,21 --rounds 5 --clocks --json "$TMP/k21_headline.json"
        python runner.py --kernels 16,20,21 --rounds 5 --clocks --causal --json "$TMP/k21_causal.json"
        python runner.py --kernels 16,20,21 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k21_1024.json"
        python runner.py --kernels 16,20,21 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k21_16384.json"
        merge results/fa4_k21.json "$TMP"/k21_{headline,causal,1024,16384}.json
        ;;
    prefill_k16_k21.json) # chapters 16, 20 and 21 at the headline shape, full and causal, in long runs
        python runner.py --kernels 16,20,21 --rounds 15 --json "$TMP/prefill_k21_full.json"
        python runner.py --kernels 16,20,21 --rounds 15 --causal --json "$TMP/prefill_k21_causal.json"
        merge results/prefill_k16_k21.json "$TMP"/prefill_k21_{full,causal}.json
        ;;
    decode_k21.json) python runner.py decode --kernels 16,20,21 --rounds 5 --json results/decode_k21.json ;;
    fa4_k26.json) # FlashAttention-4 beside chapters 21 to 26 at the four shapes, with each one's SM clock and power
        python runner.py --kernels 21,22,23,24,25,26 --rounds 5 --clocks --json "$TMP/k26_headline.json"
        python runner.py --kernels 21,22,23,24,25,26 --rounds 5 --clocks --causal --json "$TMP/k26_causal.json"
        python runner.py --kernels 21,22,23,24,25,26 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k26_1024.json"
        python runner.py --kernels 21,22,23,24,25,26 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k26_16384.json"
        merge results/fa4_k26.json "$TMP"/k26_{headline,causal,1024,16384}.json
        ;;
    decode_k26.json) python runner.py decode --kernels 21,22,23,24,25,26 --rounds 5 --json results/decode_k26.json ;;
    k26_k27.json) # chapter 27 beside chapter 26 at the four shapes (FlashAttention-4 as a row where installed)
        python runner.py --kernels 26,27 --rounds 5 --clocks --json "$TMP/k27_headline.json"
        python runner.py --kernels 26,27 --rounds 5 --clocks --causal --json "$TMP/k27_causal.json"
        python runner.py --kernels 26,27 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k27_1024.json"
        python runner.py --kernels 26,27 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k27_16384.json"
        merge results/k26_k27.json "$TMP"/k27_{headline,causal,1024,16384}.json
        ;;
    k26_k27_repeat.json) # chapter 27 beside chapter 26 again: the headline shape, full and causal, and 15 rounds at 1,024 keys
        python runner.py --kernels 26,27 --rounds 5 --clocks --json "$TMP/k27_again_headline.json"
        python runner.py --kernels 26,27 --rounds 5 --clocks --causal --json "$TMP/k27_again_causal.json"
        python runner.py --kernels 26,27 --rounds 15 --clocks --batch 64 --seq-len 1024 --json "$TMP/k27_again_1024.json"
        merge results/k26_k27_repeat.json "$TMP"/k27_again_{headline,causal,1024}.json
        ;;
    stalls_k26_k27_16384.json) # where the warps of chapters 26 and 27 wait at 16,384 keys, and what they execute
        python runner.py stalls 26 27 --batch 4 --seq-len 16384 --json results/stalls_k26_k27_16384.json \
            >results/stalls_k26_k27_16384.txt ;;
    decode_k27.json) python runner.py decode --kernels 26,27 --rounds 5 --json results/decode_k27.json ;;
    k27_k28.json) # chapter 28 beside chapter 27 at the four shapes (FlashAttention-4 as a row where installed)
        python runner.py --kernels 27,28 --rounds 5 --clocks --json "$TMP/k28_headline.json"
        python runner.py --kernels 27,28 --rounds 5 --clocks --causal --json "$TMP/k28_causal.json"
        python runner.py --kernels 27,28 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k28_1024.json"
        python runner.py --kernels 27,28 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k28_16384.json"
        merge results/k27_k28.json "$TMP"/k28_{headline,causal,1024,16384}.json
        ;;
    decode_k28.json) python runner.py decode --kernels 27,28 --rounds 5 --json results/decode_k28.json ;;
    k28_k29.json) # chapter 29 beside chapter 28 at the four shapes (FlashAttention-4 as a row where installed)
        python runner.py --kernels 28,29 --rounds 5 --clocks --json "$TMP/k29_headline.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --causal --json "$TMP/k29_causal.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k29_1024.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k29_16384.json"
        merge results/k28_k29.json "$TMP"/k29_{headline,causal,1024,16384}.json
        ;;
    k28_k29_repeat.json) # chapter 29 beside chapter 28 and FlashAttention-4 again, the four shapes in a second run
        python runner.py --kernels 28,29 --rounds 5 --clocks --json "$TMP/k29_again_headline.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --causal --json "$TMP/k29_again_causal.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k29_again_1024.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k29_again_16384.json"
        merge results/k28_k29_repeat.json "$TMP"/k29_again_{headline,causal,1024,16384}.json
        ;;
    decode_k29.json) python runner.py decode --kernels 28,29 --rounds 5 --json results/decode_k29.json ;;
    k28_k29_h200.json) # chapter 29 beside chapter 28 and FlashAttention-4 at the four shapes, on an H200
        python runner.py --kernels 28,29 --rounds 5 --clocks --json "$TMP/h200_headline.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --causal --json "$TMP/h200_causal.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/h200_1024.json"
        python runner.py --kernels 28,29 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/h200_16384.json"
        merge results/k28_k29_h200.json "$TMP"/h200_{headline,causal,1024,16384}.json
        ;;
    k29_k30.json) # chapter 30 beside chapter 29 at the four shapes (FlashAttention-4 as a row where installed)
        python runner.py --kernels 29,30 --rounds 5 --clocks --json "$TMP/k30_headline.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --causal --json "$TMP/k30_causal.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k30_1024.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k30_16384.json"
        merge results/k29_k30.json "$TMP"/k30_{headline,causal,1024,16384}.json
        ;;
    k29_k30_h200.json) # chapter 30 beside chapter 29 and FlashAttention-4 at the four shapes, on an H200
        python runner.py --kernels 29,30 --rounds 5 --clocks --json "$TMP/k30_h200_headline.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --causal --json "$TMP/k30_h200_causal.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k30_h200_1024.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k30_h200_16384.json"
        merge results/k29_k30_h200.json "$TMP"/k30_h200_{headline,causal,1024,16384}.json
        ;;
    k30_k31.json) # chapter 31 beside chapter 30 at the four shapes (FlashAttention-4 as a row where installed)
        python runner.py --kernels 30,31 --rounds 5 --clocks --json "$TMP/k31_headline.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --causal --json "$TMP/k31_causal.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k31_1024.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k31_16384.json"
        merge results/k30_k31.json "$TMP"/k31_{headline,causal,1024,16384}.json
        ;;
    k30_k31_headline.json) # chapter 31 beside chapter 30 at the headline shape alone
        python runner.py --kernels 30,31 --rounds 5 --clocks --json results/k30_k31_headline.json ;;
    k30_k31_h200.json) # chapter 31 beside chapter 30 and FlashAttention-4 at the four shapes, on an H200
        python runner.py --kernels 30,31 --rounds 5 --clocks --json "$TMP/k31_h200_headline.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --causal --json "$TMP/k31_h200_causal.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k31_h200_1024.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k31_h200_16384.json"
        merge results/k30_k31_h200.json "$TMP"/k31_h200_{headline,causal,1024,16384}.json
        ;;
    k30_k31_fa4.json) # chapter 31 beside chapter 30 and FlashAttention-4 at the four shapes, on the GPU at hand
        python runner.py --kernels 30,31 --rounds 5 --clocks --json "$TMP/k31_fa4_headline.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --causal --json "$TMP/k31_fa4_causal.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k31_fa4_1024.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k31_fa4_16384.json"
        merge results/k30_k31_fa4.json "$TMP"/k31_fa4_{headline,causal,1024,16384}.json
        ;;
    k30_k31_fa4_repeat.json) # chapter 31 beside chapter 30 and FlashAttention-4 again, the four shapes in a second run
        python runner.py --kernels 30,31 --rounds 5 --clocks --json "$TMP/k31_fa4_again_headline.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --causal --json "$TMP/k31_fa4_again_causal.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k31_fa4_again_1024.json"
        python runner.py --kernels 30,31 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k31_fa4_again_16384.json"
        merge results/k30_k31_fa4_repeat.json "$TMP"/k31_fa4_again_{headline,causal,1024,16384}.json
        ;;
    k31_k32.json) # chapter 32 beside chapter 31 at the four shapes (FlashAttention-4 as a row where installed), on the GPU at hand
        python runner.py --kernels 31,32 --rounds 5 --clocks --json "$TMP/k32_headline.json"
        python runner.py --kernels 31,32 --rounds 5 --clocks --causal --json "$TMP/k32_causal.json"
        python runner.py --kernels 31,32 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k32_1024.json"
        python runner.py --kernels 31,32 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k32_16384.json"
        merge results/k31_k32.json "$TMP"/k32_{headline,causal,1024,16384}.json
        ;;
    k31_k32_h200.json) # chapter 32 beside chapter 31 at the four shapes (FlashAttention-4 as a row where installed), on an H200
        python runner.py --kernels 31,32 --rounds 5 --clocks --json "$TMP/k32_h200_headline.json"
        python runner.py --kernels 31,32 --rounds 5 --clocks --causal --json "$TMP/k32_h200_causal.json"
        python runner.py --kernels 31,32 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k32_h200_1024.json"
        python runner.py --kernels 31,32 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k32_h200_16384.json"
        merge results/k31_k32_h200.json "$TMP"/k32_h200_{headline,causal,1024,16384}.json
        ;;
    k29_k30_fa4.json) # chapter 30 beside chapter 29 and FlashAttention-4 at the four shapes, on the GPU at hand
        python runner.py --kernels 29,30 --rounds 5 --clocks --json "$TMP/k30_fa4_headline.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --causal --json "$TMP/k30_fa4_causal.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k30_fa4_1024.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k30_fa4_16384.json"
        merge results/k29_k30_fa4.json "$TMP"/k30_fa4_{headline,causal,1024,16384}.json
        ;;
    k29_k30_fa4_repeat.json) # chapter 30 beside chapter 29 and FlashAttention-4 again, the four shapes in a second run
        python runner.py --kernels 29,30 --rounds 5 --clocks --json "$TMP/k30_again_headline.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --causal --json "$TMP/k30_again_causal.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/k30_again_1024.json"
        python runner.py --kernels 29,30 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k30_again_16384.json"
        merge results/k29_k30_fa4_repeat.json "$TMP"/k30_again_{headline,causal,1024,16384}.json
        ;;
    decode_k30.json) python runner.py decode --kernels 29,30 --rounds 5 --json results/decode_k30.json ;;
    decode_k31.json) python runner.py decode --kernels 30,31 --rounds 5 --json results/decode_k31.json ;;
    decode_k32.json) python runner.py decode --kernels 31,32 --rounds 5 --json results/decode_k32.json ;;
    timeline_seam_k30.json) # kernels 29 and 30 stamped at 1,024 keys: the stop between query tiles, before and after
        python runner.py timeline 29 30 --batch 64 --seq-len 1024 --json results/timeline_seam_k30.json \
            >results/timeline_seam_k30.txt ;;
    ablation_ch30.json) # kernel 30 beside its O written out under the next query tile's first S, at 1,024 keys
        python runner.py ablate o_under_next_s --rounds 7 --clocks --batch 64 --seq-len 1024 --json results/ablation_ch30.json ;;
    ablation_ch30_o_under_next_s.json) # the same at the headline shape, full and causal
        python runner.py ablate o_under_next_s --rounds 7 --clocks --json "$TMP/under_headline.json"
        python runner.py ablate o_under_next_s --rounds 7 --clocks --causal --json "$TMP/under_causal.json"
        merge results/ablation_ch30_o_under_next_s.json "$TMP"/under_{headline,causal}.json
        ;;
    ablation_ch30_q_in_registers.json) # kernel 30 beside Q in registers, crossed with its first exponentials under P V: 16,384 keys, the headline shape and 1,024 keys
        python runner.py ablate q_in_registers --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/q_16384.json"
        python runner.py ablate q_in_registers --rounds 5 --clocks --batch 16 --seq-len 4096 --json "$TMP/q_4096.json"
        python runner.py ablate q_in_registers --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/q_1024.json"
        merge results/ablation_ch30_q_in_registers.json "$TMP"/q_{16384,4096,1024}.json
        ;;
    timeline_seam_o_under_next_s.json) # kernel 30 and its O written out under the next first S, stamped at 1,024 keys
        python runner.py timeline 30 k30_o_under_next_s --batch 64 --seq-len 1024 --json results/timeline_seam_o_under_next_s.json \
            >results/timeline_seam_o_under_next_s.txt ;;
    ablation_ch29.json) # kernel 29's last wave whole or split along the keys, at the three full shapes
        python runner.py ablate tail_split --rounds 7 --clocks --json "$TMP/tail_headline.json"
        python runner.py ablate tail_split --rounds 7 --clocks --batch 64 --seq-len 1024 --json "$TMP/tail_1024.json"
        python runner.py ablate tail_split --rounds 7 --clocks --batch 4 --seq-len 16384 --json "$TMP/tail_16384.json"
        merge results/ablation_ch29.json "$TMP"/tail_{headline,1024,16384}.json
        ;;
    ablation_ch29_kv_multicast.json) # kernel 29 beside its blocks sharing K and V by multicast: 16,384 keys, where they pair, and the headline shape
        python runner.py ablate kv_multicast --rounds 7 --clocks --batch 4 --seq-len 16384 --json "$TMP/shared_16384.json"
        python runner.py ablate kv_multicast --rounds 7 --clocks --json "$TMP/shared_headline.json"
        merge results/ablation_ch29_kv_multicast.json "$TMP"/shared_{16384,headline}.json
        ;;
    ablation_ch29_next_query_tile.json) # kernel 29 beside its query tiles started with the last P V before them: 1,024 keys, the headline shape, causal
        python runner.py ablate next_query_tile --rounds 7 --clocks --batch 64 --seq-len 1024 --json "$TMP/next_1024.json"
        python runner.py ablate next_query_tile --rounds 7 --clocks --json "$TMP/next_headline.json"
        python runner.py ablate next_query_tile --rounds 7 --clocks --causal --json "$TMP/next_causal.json"
        merge results/ablation_ch29_next_query_tile.json "$TMP"/next_{1024,headline,causal}.json
        ;;
    ablation_ch29_less_per_tile.json) # kernel 29 beside its rescale vote and its half-wide diagonal tile: full, causal, 16,384 keys
        python runner.py ablate less_per_tile --rounds 7 --clocks --json "$TMP/again_headline.json"
        python runner.py ablate less_per_tile --rounds 7 --clocks --causal --json "$TMP/again_causal.json"
        python runner.py ablate less_per_tile --rounds 7 --clocks --batch 4 --seq-len 16384 --json "$TMP/again_16384.json"
        merge results/ablation_ch29_less_per_tile.json "$TMP"/again_{headline,causal,16384}.json
        ;;
    loop_anatomy_ch29_less_per_tile.txt) # kernel 29's tile loop beside its rescale vote and half-wide diagonal tile (no GPU needed)
        python -m kernels.tools.loop_anatomy 29 k29_lazy_rescale k29_half_tile >results/loop_anatomy_ch29_less_per_tile.txt ;;
    loop_anatomy_ch30_q_in_registers.txt) # kernel 30's tile loop beside Q in registers and the first exponentials under P V (no GPU needed)
        python -m kernels.tools.loop_anatomy 30 k30_q_in_registers k30_early_exponentials k30_q_early_exponentials \
            >results/loop_anatomy_ch30_q_in_registers.txt ;;
    profile_tail_split_16384.json) # kernel 29, its split tail and FlashAttention-4 under Nsight Compute at 16,384 keys
        python runner.py profile 29 k29_tail_split fa4 --batch 4 --seq-len 16384 --json results/profile_tail_split_16384.json >results/profile_tail_split_16384.txt
        ;;
    k27_k29_h200.json) # chapters 27 to 29 causal and at 16,384 keys, in one run each
        python runner.py --kernels 27,28,29 --rounds 5 --clocks --causal --json "$TMP/k29_h200_causal.json"
        python runner.py --kernels 27,28,29 --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/k29_h200_16384.json"
        merge results/k27_k29_h200.json "$TMP"/k29_h200_{causal,16384}.json
        ;;
    timeline_k21_k26.json) # each consumer warp's phases in chapters 21 to 26: the producer, the loop's top, the turns
        python runner.py timeline 21 22 23 24 25 26 --json results/timeline_k21_k26.json >results/timeline_k21_k26.txt ;;
    prefill_k16_k20.json) # chapters 16, 19 and 20 at the headline shape, full and causal: what decoding cost prefill
        python runner.py --kernels 16,19,20 --rounds 15 --json "$TMP/prefill_full.json"
        python runner.py --kernels 16,19,20 --rounds 15 --causal --json "$TMP/prefill_causal.json"
        merge results/prefill_k16_k20.json "$TMP"/prefill_{full,causal}.json
        ;;
    sweep.json) python runner.py --seq-len 1024,16384 --kernels 5,8,10,11,12,13,14,15 --rounds 5 --json results/sweep.json ;;
    sweep_causal.json)
        python runner.py --causal --seq-len 1024,16384 --kernels 12,13,14,15 --rounds 5 --json results/sweep_causal.json
        ;;
    sweep_k16.json) python runner.py --seq-len 1024,16384 --kernels 14,15,16 --rounds 5 --json results/sweep_k16.json ;;
    sweep_causal_k16.json)
        python runner.py --causal --seq-len 1024,16384 --kernels 14,15,16 --rounds 5 --json results/sweep_causal_k16.json
        ;;
    ablation_ch03.json) python runner.py ablate 3 --rounds 5 --json results/ablation_ch03.json ;;
    ablation_ch05.json) python runner.py ablate 5 --rounds 5 --json results/ablation_ch05.json ;;
    ablation_ch07.json) python runner.py ablate 7 --rounds 5 --json results/ablation_ch07.json ;;
    ablation_ch14.json) python runner.py ablate 14 --rounds 5 --json results/ablation_ch14.json ;;
    ablation_ch16.json) python runner.py ablate 16 --rounds 5 --json results/ablation_ch16.json ;;
    ablation_ch16_16384.json)
        python runner.py ablate 16 --seq-len 16384 --rounds 3 --json results/ablation_ch16_16384.json
        ;;
    ablation_ch16_causal.json) python runner.py ablate 16 --causal --rounds 5 --json results/ablation_ch16_causal.json ;;
    ablation_ch18.json) python runner.py ablate 18 --rounds 5 --json results/ablation_ch18.json ;;
    ablation_ch18_causal.json) python runner.py ablate 18 --causal --rounds 5 --json results/ablation_ch18_causal.json ;;
    ablation_ch19.json) python runner.py ablate dynamic_schedule --rounds 5 --json results/ablation_ch19.json ;;
    ablation_ch19_causal.json)
        python runner.py ablate dynamic_schedule --causal --rounds 5 --json results/ablation_ch19_causal.json
        ;;
    ablation_ch19_l2_prefetch.json) # L2 prefetches of K and V at the decode shapes
        python runner.py ablate l2_prefetch --decode --rounds 5 --json results/ablation_ch19_l2_prefetch.json ;;
    ablation_ch19_ping_pong.json) # the ping-pong set at the four shapes of fa4_k16_k19.json
        python runner.py ablate ping_pong --rounds 5 --json "$TMP/pp_headline.json"
        python runner.py ablate ping_pong --rounds 5 --causal --json "$TMP/pp_causal.json"
        python runner.py ablate ping_pong --rounds 5 --batch 64 --seq-len 1024 --json "$TMP/pp_1024.json"
        python runner.py ablate ping_pong --rounds 5 --batch 4 --seq-len 16384 --json "$TMP/pp_16384.json"
        merge results/ablation_ch19_ping_pong.json "$TMP"/pp_{headline,causal,1024,16384}.json
        ;;
    ablation_ch20_prefill_instance.json) # chapters 17 and 18's generality compiled out of kernel 20, full and causal
        python runner.py ablate prefill_instance --rounds 9 --json "$TMP/instance_full.json"
        python runner.py ablate prefill_instance --rounds 9 --causal --json "$TMP/instance_causal.json"
        merge results/ablation_ch20_prefill_instance.json "$TMP"/instance_{full,causal}.json
        ;;
    ablation_ch20_longest_first.json) # kernel 20's work items: pairs or single tiles, longer or shorter first
        python runner.py ablate longest_first --rounds 5 --clocks --json "$TMP/items_full.json"
        python runner.py ablate longest_first --rounds 5 --clocks --causal --json "$TMP/items_causal.json"
        merge results/ablation_ch20_longest_first.json "$TMP"/items_{full,causal}.json
        ;;
    ablation_ch20_maxima_first.json) # FlashAttention-4's order on kernel 20, taken apart, at the four shapes of fa4_clocks.json
        python runner.py ablate maxima_first --rounds 5 --clocks --json "$TMP/maxima_headline.json"
        python runner.py ablate maxima_first --rounds 5 --clocks --causal --json "$TMP/maxima_causal.json"
        python runner.py ablate maxima_first --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/maxima_1024.json"
        python runner.py ablate maxima_first --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/maxima_16384.json"
        merge results/ablation_ch20_maxima_first.json "$TMP"/maxima_{headline,causal,1024,16384}.json
        ;;
    ablation_ch21.json) # the rest of the softmax on kernel 21, in halves, at the headline shape and 16,384 keys
        python runner.py ablate split_products --rounds 5 --json "$TMP/split_headline.json"
        python runner.py ablate split_products --rounds 5 --batch 4 --seq-len 16384 --json "$TMP/split_16384.json"
        merge results/ablation_ch21.json "$TMP"/split_{headline,16384}.json
        ;;
    ablation_ch21_clock_fence.json) # kernel 21's fence as a memory fence or a clock read, with and without turns
        python runner.py ablate clock_fence --rounds 5 --clocks --json results/ablation_ch21_clock_fence.json ;;
    ablation_ch21_loop_top.json) # kernel 21's loop top: one wait or two before S, stages from a signed or unsigned count
        python runner.py ablate loop_top --rounds 5 --clocks --json results/ablation_ch21_loop_top.json ;;
    ablation_ch21_producer_warp.json) # the producer's thread in warp 8 or 9, its waits with or without a suspend-time hint
        python runner.py ablate producer_warp --rounds 5 --clocks --json results/ablation_ch21_producer_warp.json ;;
    ablation_ch21_row_sums.json) # the row sums by additions or on the tensor cores, with or without kernel 21's fence
        python runner.py ablate row_sums --rounds 5 --clocks --json results/ablation_ch21_row_sums.json ;;
    ablation_ch21_short_tile.json) # FlashAttention-4's tile on kernel 21, piece by piece, at the four shapes of fa4_k21.json
        python runner.py ablate short_tile --rounds 5 --clocks --json "$TMP/short_headline.json"
        python runner.py ablate short_tile --rounds 5 --clocks --causal --json "$TMP/short_causal.json"
        python runner.py ablate short_tile --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/short_1024.json"
        python runner.py ablate short_tile --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/short_16384.json"
        merge results/ablation_ch21_short_tile.json "$TMP"/short_{headline,causal,1024,16384}.json
        ;;
    timeline_clock_fence.json) # kernel 21's tile loop stamped beside its clock-read fence's
        python runner.py timeline 21 k21_clock_fence --rounds 2 --json results/timeline_clock_fence.json ;;
    ablation_ch21_softmax_first.json) # the whole softmax between the waits on kernel 21, at the four shapes of fa4_k21.json
        python runner.py ablate softmax_first --rounds 5 --clocks --json "$TMP/softmax_headline.json"
        python runner.py ablate softmax_first --rounds 5 --clocks --causal --json "$TMP/softmax_causal.json"
        python runner.py ablate softmax_first --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/softmax_1024.json"
        python runner.py ablate softmax_first --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/softmax_16384.json"
        merge results/ablation_ch21_softmax_first.json "$TMP"/softmax_{headline,causal,1024,16384}.json
        ;;
    ablation_ch26.json) # the whole softmax between the waits on kernel 26, at the headline shape and 16,384 keys
        python runner.py ablate ch26_softmax_in_turns --rounds 5 --clocks --json "$TMP/turns_headline.json"
        python runner.py ablate ch26_softmax_in_turns --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/turns_16384.json"
        merge results/ablation_ch26.json "$TMP"/turns_{headline,16384}.json
        ;;
    ablation_ch28.json) # kernel 28's work list beside kernel 27's pairs, one unit at a time or interleaved: four shapes
        python runner.py ablate ch28_single_tiles --rounds 5 --clocks --json "$TMP/items_headline.json"
        python runner.py ablate ch28_single_tiles --rounds 5 --clocks --causal --json "$TMP/items_causal.json"
        python runner.py ablate ch28_single_tiles --rounds 5 --clocks --batch 64 --seq-len 1024 --json "$TMP/items_1024.json"
        python runner.py ablate ch28_single_tiles --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/items_16384.json"
        merge results/ablation_ch28.json "$TMP"/items_{headline,causal,1024,16384}.json
        ;;
    ablation_ch20_quiet_producer.json) # mbarrier waits that sleep between tries, at the headline shape and 16,384 keys
        python runner.py ablate quiet_producer --rounds 5 --clocks --json "$TMP/quiet_headline.json"
        python runner.py ablate quiet_producer --rounds 5 --clocks --batch 4 --seq-len 16384 --json "$TMP/quiet_16384.json"
        merge results/ablation_ch20_quiet_producer.json "$TMP"/quiet_{headline,16384}.json
        ;;
    ablation_ch20.json) # the decode kernel's copies and merge, each as first written, at the decode shapes
        python runner.py ablate 20 --decode --rounds 5 --json results/ablation_ch20.json ;;
    peak.json) python runner.py peak --json results/peak.json ;;
    decode_splits.json) # the decode kernel of chapter 20 with its rule's split count and 2, 4 and 8 times as many
        python -m kernels.tools.decode_splits --rounds 7 --json results/decode_splits.json >results/decode_splits.txt ;;
    read_rate.json) python runner.py read_rate --rounds 5 --json results/read_rate.json >results/read_rate.txt ;;
    profile_k02_to_k04.json)
        python runner.py profile 2 3 4 --json results/profile_k02_to_k04.json >results/profile_k02_to_k04.txt
        ;;
    profile_k05_to_k09.txt)
        {
            echo "# Nsight Compute, batch 16, seq 4096, 16 heads, bf16 (python runner.py profile 5 / 6 / 7 / 8 / 9)"
            python -m kernels.tools.sources 5 6 7 8 9
            for chapter in 5 6 7 8 9; do python runner.py profile "$chapter"; done
        } >results/profile_k05_to_k09.txt
        ;;
    profile_k08_fa2.json) python runner.py profile 8 fa2 --json results/profile_k08_fa2.json >results/profile_k08_fa2.txt ;;
    profile_k12_cudnn.json)
        python runner.py profile 12 cudnn --json results/profile_k12_cudnn.json >results/profile_k12_cudnn.txt
        ;;
    profile_k14_to_k16_16384.json)
        python runner.py profile 14 15 16 --seq-len 16384 --json results/profile_k14_to_k16_16384.json \
            >results/profile_k14_to_k16_16384.txt
        ;;
    profile_k15_cudnn.json)
        python runner.py profile 15 cudnn --json results/profile_k15_cudnn.json >results/profile_k15_cudnn.txt
        ;;
    profile_k16_cudnn.json)
        python runner.py profile 16 cudnn --json results/profile_k16_cudnn.json >results/profile_k16_cudnn.txt
        ;;
    profile_k16_fa4.json) python runner.py profile 16 fa4 --json results/profile_k16_fa4.json ;;
    profile_k20_fa4_16384.json) # chapter 20 beside FlashAttention-4 at 16,384 keys, one launch each
        python runner.py profile 20 fa4 --batch 4 --seq-len 16384 --json results/profile_k20_fa4_16384.json \
            >results/profile_k20_fa4_16384.txt
        ;;
    profile_k30_k31_fa4.json) # chapters 30 and 31 beside FlashAttention-4 at the headline shape, one launch each
        python runner.py profile 30 31 fa4 --json results/profile_k30_k31_fa4.json >results/profile_k30_k31_fa4.txt
        ;;
    profile_k23_k24_fa4_16384.json) # chapters 23 and 24 beside FlashAttention-4 at 16,384 keys: the producer's waits
        python runner.py profile 23 24 fa4 --batch 4 --seq-len 16384 --json results/profile_k23_k24_fa4_16384.json \
            >results/profile_k23_k24_fa4_16384.txt
        ;;
    profile_k20_k21_16384.json) # chapters 20 and 21 at 16,384 keys, one launch each: the maxima under P V
        python runner.py profile 20 21 --batch 4 --seq-len 16384 --json results/profile_k20_k21_16384.json \
            >results/profile_k20_k21_16384.txt
        ;;
    timeline_headline.json) # the tile loops of chapters 16, 20 and 21 and of variants of 20 and 21, stamped
        python runner.py timeline 16 20 21 k20_maxima_ping_pong k21_split_products k21_softmax_first --json results/timeline_headline.json \
            >results/timeline_headline.txt ;;
    timeline_16384.json) # the same at 16,384 keys
        python runner.py timeline 16 20 21 k20_maxima_ping_pong k21_split_products k21_softmax_first --batch 4 --seq-len 16384 --json results/timeline_16384.json >results/timeline_16384.txt ;;
    timeline_seam_1024.json) # kernel 29 and its query tiles started with the last P V, stamped at 1,024 keys: what the loop's stop between query tiles costs
        python runner.py timeline 29 k29_next_query_tile --batch 64 --seq-len 1024 --json results/timeline_seam_1024.json \
            >results/timeline_seam_1024.txt ;;
    stalls_k19_fa4.json) # where the warps of chapter 19 and of FlashAttention-4 wait, instruction by instruction
        python runner.py stalls 19 fa4 --json results/stalls_k19_fa4.json >results/stalls_k19_fa4.txt
        ;;
    stalls_decode_8x32768.json) # the same for chapter 19 and cuDNN decoding one token against 32,768 keys
        python runner.py stalls 19 cudnn --batch 8 --seq-len 1 --heads 32 --kv-heads 8 --kv-len 32768 --json results/stalls_decode_8x32768.json >results/stalls_decode_8x32768.txt
        ;;
    qwen3_attention.txt) { python -m kernels.tools.sources op && python -m examples.qwen3_attention; } >results/qwen3_attention.txt ;;
    qwen3_attention_repeats.txt)
        {
            echo "# The Qwen3 example run four times in a row, twice on the op's default chapter and twice on"
            echo "# chapter 15; the last lines of each run's table."
            python -m kernels.tools.sources op 15
            for _ in 1 2; do
                python -m examples.qwen3_attention | tail -7
                python -m examples.qwen3_attention --chapter 15 | tail -3
            done
        } >results/qwen3_attention_repeats.txt
        ;;
    sanitizer.txt) sanitize 7 8 9 10 11 12 13 14 15 16 >results/sanitizer.txt ;;
    sanitizer_k17_k18.txt) sanitize 17 18 >results/sanitizer_k17_k18.txt ;;
    profile_decode_8x32768.json)
        python runner.py profile 16 17 18 cudnn --batch 8 --seq-len 1 --heads 32 --kv-heads 8 --kv-len 32768 --json results/profile_decode_8x32768.json \
            >results/profile_decode_8x32768.txt
        ;;
    sanitizer_k19.txt) sanitize 19 >results/sanitizer_k19.txt ;;
    sanitizer_k20.txt) sanitize 20 >results/sanitizer_k20.txt ;;
    sanitizer_k21.txt) sanitize 21 >results/sanitizer_k21.txt ;;
    sanitizer_k22_k26.txt) sanitize 22 23 24 25 26 >results/sanitizer_k22_k26.txt ;;
    sanitizer_k27.txt) sanitize 27 >results/sanitizer_k27.txt ;;
    sanitizer_k28.txt) sanitize 28 >results/sanitizer_k28.txt ;;
    sanitizer_k29.txt) sanitize 29 >results/sanitizer_k29.txt ;;
    sanitizer_k30.txt) sanitize 30 >results/sanitizer_k30.txt ;;
    sanitizer_k31.txt) sanitize 31 >results/sanitizer_k31.txt ;;
    sanitizer_k32.txt) sanitize 32 >results/sanitizer_k32.txt ;;
    sanitizer_o_under_next_s.txt) sanitize k30_o_under_next_s >results/sanitizer_o_under_next_s.txt ;;
    sanitizer_q_in_registers.txt) sanitize k30_q_in_registers >results/sanitizer_q_in_registers.txt ;;
    sanitizer_next_query_tile.txt) sanitize k29_next_query_tile >results/sanitizer_next_query_tile.txt ;;
    sanitizer_tail_split.txt) sanitize k29_tail_split >results/sanitizer_tail_split.txt ;;
    sanitizer_kv_multicast.txt) sanitize k29_kv_multicast >results/sanitizer_kv_multicast.txt ;;
    dynamic_schedule.json) # chapter 19 beside 16 and 18: long sequences, where the schedule moves DRAM bytes, and the headline
        python runner.py --kernels 16,18,19 --rounds 5 --seq-len 16384 --json "$TMP/dynamic_16384.json"
        python runner.py --kernels 16,18,19 --rounds 5 --json "$TMP/dynamic_headline.json"
        python runner.py --kernels 16,18,19 --rounds 5 --causal --json "$TMP/dynamic_causal.json"
        merge results/dynamic_schedule.json "$TMP"/dynamic_{16384,headline,causal}.json
        ;;
    profile_k18_k19_16384.json)
        python runner.py profile 18 19 --seq-len 16384 --json results/profile_k18_k19_16384.json \
            >results/profile_k18_k19_16384.txt
        ;;
    profile_causal_k16_k20.json) # causal prefill at the headline shape, one launch each, where chapters 17-20 changed it
        python runner.py profile 16 17 18 20 --causal --json results/profile_causal_k16_k20.json \
            >results/profile_causal_k16_k20.txt ;;
    profile_decode_k20.json) # the decode kernel beside kernel 19 and cuDNN's at the first decode shape
        python runner.py profile 19 20 cudnn --batch 64 --seq-len 1 --heads 32 --kv-heads 8 --kv-len 8192 --json results/profile_decode_k20.json \
            >results/profile_decode_k20.txt ;;
    profile_decode_1x4352.json) # one sequence decoding, as examples/qwen3_generation.py at batch 1: the split keys
        python runner.py profile 19 cudnn --batch 1 --seq-len 1 --heads 32 --kv-heads 8 --kv-len 4352 --json results/profile_decode_1x4352.json >results/profile_decode_1x4352.txt
        ;;
    profile_decode_128x2048.json)
        python runner.py profile 18 19 cudnn --batch 128 --seq-len 1 --heads 16 --kv-len 2048 --json results/profile_decode_128x2048.json \
            >results/profile_decode_128x2048.txt
        ;;
    qwen3_generation.json) python -m examples.qwen3_generation --json results/qwen3_generation.json ;;
    qwen3_generation_k21.json) # the generation on chapter 21, the op's chapter
        python -m examples.qwen3_generation --chapter 21 --json results/qwen3_generation_k21.json ;;
    qwen3_generation_k26.json) # the generation on chapter 26, the op's chapter
        python -m examples.qwen3_generation --chapter 26 --json results/qwen3_generation_k26.json ;;
    loop_anatomy_k22_k26.txt) # the tile loops of chapters 22 to 26, instruction by instruction (no GPU needed)
        python -m kernels.tools.loop_anatomy 22 23 24 25 26 >results/loop_anatomy_k22_k26.txt ;;
    loop_anatomy_k26_k27.txt) # the tile loops of chapters 26 and 27, instruction by instruction (no GPU needed)
        python -m kernels.tools.loop_anatomy 26 27 >results/loop_anatomy_k26_k27.txt ;;
    loop_anatomy_k29_k30.txt) # the tile loops of chapters 29 and 30, instruction by instruction (no GPU needed)
        python -m kernels.tools.loop_anatomy 29 30 >results/loop_anatomy_k29_k30.txt ;;
    loop_anatomy_k30_k31.txt) # the tile loops of chapters 30 and 31, instruction by instruction (no GPU needed)
        python -m kernels.tools.loop_anatomy 30 31 >results/loop_anatomy_k30_k31.txt ;;
    loop_anatomy_k31_k32.txt) # the tile loops of chapters 31 and 32, instruction by instruction (no GPU needed)
        python -m kernels.tools.loop_anatomy 31 32 >results/loop_anatomy_k31_k32.txt ;;
    loop_anatomy_ch19_trims.txt) # chapter 19's tile loop beside its trimmed variants (no GPU needed)
        python -m kernels.tools.loop_anatomy 19 k19_lean k19_lean_descriptors >results/loop_anatomy_ch19_trims.txt ;;
    loop_anatomy_ch21_softmax_first.txt) # kernel 21's tile loop beside its variants with the whole softmax under P V (no GPU needed)
        python -m kernels.tools.loop_anatomy 21 k21_exponentials_first k21_rescale_late k21_softmax_first \
            >results/loop_anatomy_ch21_softmax_first.txt ;;
    loop_anatomy_ch21_short_tile.txt) # kernel 21's tile loop beside FlashAttention-4's tile on it, piece by piece (no GPU needed)
        python -m kernels.tools.loop_anatomy 21 k21_ping_pong k21_peeked k21_short_tile k21_short_tile_turns \
            >results/loop_anatomy_ch21_short_tile.txt ;;
    loop_anatomy_k20_k21.txt) # the tile loops of chapters 20 and 21: the maxima under P V (no GPU needed)
        python -m kernels.tools.loop_anatomy 20 21 >results/loop_anatomy_k20_k21.txt ;;
    loop_anatomy_nvrtc_13_4.txt) # the tile loops of chapters 16 and 20 built by NVRTC 13.4 (no GPU needed)
        python -m pip install -q --no-deps --target "$TMP/nvrtc" "${NVRTC_WHEEL:-nvidia-cuda-nvrtc==13.4.*}"
        LD_PRELOAD="$TMP/nvrtc/nvidia/cu13/lib/libnvrtc.so.13" FA2_LADDER_CACHE="$TMP/cache" \
            python -m kernels.tools.loop_anatomy 16 20 >results/loop_anatomy_nvrtc_13_4.txt
        ;;
    loop_anatomy_k16_k19_fa4.txt) # the tile loops of chapters 16 and 19 beside FlashAttention-4's, from the cubin its DSL keeps
        for causal in "" --causal; do
            CUTE_DSL_KEEP=cubin CUTE_DSL_DUMP_DIR="$TMP/fa4" python -m kernels.tools.run_once fa4 --batch 2 --seq-len 4096 --heads 16 $causal
        done
        python -m kernels.tools.loop_anatomy 16 19 --cubin "$TMP"/fa4/*.cubin --cubin-name flash-attn-4 \
            >results/loop_anatomy_k16_k19_fa4.txt
        ;;
    *)
        echo "record_results: no recipe for results/$1" >&2
        return 2
        ;;
    esac
}

# The recipes above, in order: every file in results/ is written by one of them.
FILES=$(sed -n 's/^    \([a-z0-9_]*\.\(json\|txt\)\)).*/\1/p' "$0")
for file in ${*:-$FILES}; do
    echo "== results/$file" >&2
    record "$file"
done
python docs/make_results.py
