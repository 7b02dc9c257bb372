// The ceiling of mma.sync: the most bf16 FLOP/s Ampere's tensor-core instruction gets on this GPU.
//
// Chapters 1-8 issue mma.sync.m16n8k16 and nothing faster, so no kernel built on them can beat the rate
// measured here. To measure the instruction and nothing else, every warp repeats it on operands that
// never leave its registers: no loads in the loop, no shared memory, no softmax. A warp's mma writes an
// accumulator it reads again, so one chain of them runs at the instruction's latency, not its rate: each
// warp keeps CHAINS independent accumulators and issues them in turn. The inputs are random values from
// global memory, not constants, so the compiler cannot fold them, and every accumulator ends in a store,
// so it cannot drop them (a test checks the result: CHAINS * UNROLL * n_steps times A * B).
//
// Grid: one block per SM (the block scheduler gives every SM a block before any SM gets a second).
// Thread -> element maps are mma.sync's: g = lane / 4, t = lane % 4.

#include <cuda_bf16.h>

constexpr int MMA_M = 16;
constexpr int MMA_N = 8;
constexpr int MMA_K = 16;
// 16 warps: an SM has 4 schedulers, each with its own tensor core, and a warp stays on one scheduler, so
// each tensor core is fed by 4 warps; when one warp stalls on a dependency another one has an mma ready.
constexpr int N_WARPS = 16;
constexpr int N_THREADS = N_WARPS * 32;
// An mma's result is ready some tens of cycles after it issues, while its tensor core accepts a new one
// every few cycles: about eight must be in flight per scheduler to keep it busy. Eight chains per warp give
// that from a single warp; with four warps per scheduler the latency is covered four times over.
constexpr int CHAINS = 8;
// Steps of all chains per trip of the loop: 64 mma per loop counter update and branch.
constexpr int UNROLL = 8;

// D += A * B for one (16, 16) x (16, 8) tile, bf16 inputs, fp32 accumulators. volatile: the chains start
// from the same zeros and the same A and B, and the compiler must not merge them into one.
__device__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two neighbouring bf16 of a row-major matrix with `cols` columns, as the one 32-bit register mma reads.
__device__ unsigned load_pair(const __nv_bfloat16* matrix, int row, int col, int cols) {
    return *reinterpret_cast<const unsigned*>(&matrix[row * cols + col]);
}

// a: A, (MMA_M, MMA_K) row-major. b_t: B transposed, (MMA_N, MMA_K) row-major (".col" B, as K is stored).
// out: per warp of the grid, the (MMA_M, MMA_N) sum of its chains, row-major.
__global__ void __launch_bounds__(N_THREADS, 1)
mma_sync_peak(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b_t, float* __restrict__ out,
              int n_steps) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    // A fragment: rows g, g + 8 and columns 2t, 2t + 1, then the same 8 columns on. B fragment: column g,
    // rows 2t, 2t + 1 and 2t + 8, 2t + 9, which are neighbours in B transposed.
    const unsigned a_frag[4] = {load_pair(a, g, 2 * t, MMA_K), load_pair(a, g + 8, 2 * t, MMA_K),
                                load_pair(a, g, 2 * t + 8, MMA_K), load_pair(a, g + 8, 2 * t + 8, MMA_K)};
    const unsigned b_frag[2] = {load_pair(b_t, g, 2 * t, MMA_K), load_pair(b_t, g, 2 * t + 8, MMA_K)};

    float acc[CHAINS][4] = {};
    // unroll 1: the body is already UNROLL * CHAINS mma long, and the SASS shows exactly one copy of it.
#pragma unroll 1
    for (int step = 0; step < n_steps; ++step) {
#pragma unroll
        for (int unrolled = 0; unrolled < UNROLL; ++unrolled) {
#pragma unroll
            for (int chain = 0; chain < CHAINS; ++chain) mma_m16n8k16(acc[chain], a_frag, b_frag);
        }
    }

    // Accumulator i holds row g + 8 * (i / 2), column 2t + i % 2.
    float* warp_out = out + (blockIdx.x * N_WARPS + warp) * MMA_M * MMA_N;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float sum = 0.0f;
#pragma unroll
        for (int chain = 0; chain < CHAINS; ++chain) sum += acc[chain][i];
        warp_out[(g + 8 * (i / 2)) * MMA_N + 2 * t + i % 2] = sum;
    }
}
