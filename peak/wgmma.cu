// The ceiling of wgmma: the most bf16 FLOP/s Hopper's warpgroup instruction gets, in the two forms that
// chapter 9 issues it.
//
// Chapter 9 computes S = Q K^T with A (Q) and B (K) both read from shared memory through descriptors, and
// O += P V with A (P) in registers and B (V) read transposed from shared memory. Each form is a kernel here
// that does nothing else: the same m64n128k16 instruction, the same 128-byte-swizzled (128, 128) tiles and
// descriptors, the same batch of eight wgmmas into one accumulator closed by a commit and a wait, and two
// warpgroups per block. What chapter 9 adds around them (copies, softmax, barriers) is left out, so the rate
// measured here bounds it from above. The tiles hold random values: the tensor cores draw more power on
// random data than on zeros, and the clocks drop to match, so zeros would measure a ceiling that is too high.
//
// Every block computes the same product and writes it out, so the result can be checked (A B^T from shared
// memory, n_batches times P V with P in registers) and the compiler cannot drop the work. Two blocks per SM (each holds at most two 32 KB
// tiles, so both fit): while one warpgroup waits for its batch to drain, three others have wgmmas queued.
// wgmma exists on sm_90a alone.

#include <cuda_bf16.h>

constexpr int TILE = 128;          // rows and columns of every tile: chapter 9's BLOCK_Q = BLOCK_KV = HEAD_DIM
constexpr int N_WARPS = 8;         // two warpgroups of four warps
constexpr int N_THREADS = N_WARPS * 32;
constexpr int BLOCKS_PER_SM = 2;
constexpr int GROUP_ROWS = 64;     // the M of every wgmma: the rows one warpgroup owns
constexpr int WGMMA_K = 16;
constexpr int BATCH = TILE / WGMMA_K;  // wgmmas per commit: one tile's K dimension, as in chapter 9
constexpr int CHUNK = 8;           // bf16 in one 16-byte vector
constexpr int PLANE = 64;          // columns in one plane of a tile: 128 bytes per row

// The 64 fp32 accumulators of one thread in a (64, 128) tile, as asm operands. In n-tile n (columns
// 8n ... 8n + 7) a lane holds rows g, g + 8 of its warp's 16 rows and columns 2t, 2t + 1 (g = lane / 4,
// t = lane % 4), the layout of mma.sync.
#define ACCUMULATORS                                                                                       \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "  \
    "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
    "%62, %63}"
#define N_TILE(d, n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define ACCUMULATOR_OPERANDS(d)                                                                            \
    N_TILE(d, 0), N_TILE(d, 1), N_TILE(d, 2), N_TILE(d, 3), N_TILE(d, 4), N_TILE(d, 5), N_TILE(d, 6),      \
        N_TILE(d, 7), N_TILE(d, 8), N_TILE(d, 9), N_TILE(d, 10), N_TILE(d, 11), N_TILE(d, 12),             \
        N_TILE(d, 13), N_TILE(d, 14), N_TILE(d, 15)

// D (+)= A * B, (64, 16) x (16, 128), A and B in shared memory; B stored (n, k) ("K-major", as K is).
// When accumulate is 0, D is overwritten. The warpgroup issues it together; the result is there after wgmma_wait.
__device__ void wgmma_smem_smem(float (&d)[16][4], unsigned long long a_desc, unsigned long long b_desc, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " ACCUMULATORS ", %64, %65, p, 1, 1, 0, 0;\n}"
                 : ACCUMULATOR_OPERANDS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
}

// D += A * B, (64, 16) x (16, 128), A in registers (mma.sync's A-fragment layout, per warp), B in shared
// memory stored (k, n), as V is: the final 1 asks the hardware to transpose it.
__device__ void wgmma_regs_smem(float (&d)[16][4], const unsigned (&a)[4], unsigned long long b_desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " ACCUMULATORS
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}"
                 : ACCUMULATOR_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

// Registers written by ordinary instructions must be fenced before a wgmma reads them.
__device__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

// Close the wgmmas issued so far into one group; wait until at most N groups are still in flight.
__device__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The compiler sees a wgmma use its registers when it issues, not when it finishes. An empty asm that
// "rewrites" them keeps every ordinary access on its side: pinned before wgmma_fence and after wgmma_wait.
template <int N>
__device__ void pin_registers(float (&d)[N][4]) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[n][i])::"memory");
    }
}

template <int N>
__device__ void pin_registers(unsigned (&a)[N][4]) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[n][i])::"memory");
    }
}

// ---------------------------------------------------------------------------------------------------
// Shared memory: chapter 9's layout. A (128, 128) tile is two planes of 64 columns, each (128 rows, 128
// bytes) row-major, chunk c of row r stored at chunk c ^ (r % 8): what wgmma's 128-byte swizzle reads.
// ---------------------------------------------------------------------------------------------------

__device__ int smem_index(int row, int col) {
    return col / PLANE * TILE * PLANE + row * PLANE + ((col % PLANE / CHUNK) ^ (row % 8)) * CHUNK + col % CHUNK;
}

// Copy a (128, 128) row-major tile from global memory into the swizzled layout, 16 bytes per copy. Done
// once, before the timed work, so plain loads and stores do; then the fence that shows the writes to the
// tensor cores' "async proxy", and a barrier that shows them to the other warps.
__device__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* matrix) {
    constexpr int CHUNKS_PER_ROW = TILE / CHUNK;
#pragma unroll
    for (int step = 0; step < TILE * CHUNKS_PER_ROW / N_THREADS; ++step) {
        const int chunk = step * N_THREADS + threadIdx.x;
        const int row = chunk / CHUNKS_PER_ROW, col = chunk % CHUNKS_PER_ROW * CHUNK;
        *reinterpret_cast<uint4*>(&tile[smem_index(row, col)]) =
            *reinterpret_cast<const uint4*>(&matrix[row * TILE + col]);
    }
}

__device__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// The descriptor of the block whose corner is element (row0, col0) of a tile (row0 a multiple of 8, col0
// of 16): the corner's address, 1 KB from one 8-row swizzle atom to the next, 16 KB (a plane) from one 64
// columns to the next, 128-byte swizzle. Addresses and strides in 16-byte units.
__device__ unsigned long long smem_descriptor(const __nv_bfloat16* tile, int row0, int col0) {
    const unsigned address = __cvta_generic_to_shared(&tile[smem_index(row0, col0)]);
    constexpr unsigned long long PLANE_BYTES = TILE * PLANE * 2, ATOM_BYTES = 8 * PLANE * 2, SWIZZLE_128B = 1;
    return (address >> 4) | (PLANE_BYTES >> 4) << 16 | (ATOM_BYTES >> 4) << 32 | SWIZZLE_128B << 62;
}

// Each thread's accumulators into out, a (128, 128) fp32 row-major tile per block: warp w owns rows
// 16w ... 16w + 15; accumulator d[n][i] is row 16w + g + 8 * (i / 2), column 8n + 2t + i % 2.
__device__ void store_accumulators(float* out, const float (&d)[16][4]) {
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    float* block_out = out + blockIdx.x * TILE * TILE;
#pragma unroll
    for (int n = 0; n < TILE / 8; ++n) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            *reinterpret_cast<float2*>(&block_out[(warp * 16 + g + 8 * h) * TILE + n * 8 + 2 * t]) =
                make_float2(d[n][2 * h], d[n][2 * h + 1]);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The kernels. Grid: BLOCKS_PER_SM blocks per SM. a, b: (128, 128) bf16 row-major; out: (grid, 128, 128) fp32.
// ---------------------------------------------------------------------------------------------------

// S = A B^T, both from shared memory: chapter 9's S = Q K^T. Each batch overwrites S, as each tile does there.
__global__ void __launch_bounds__(N_THREADS, BLOCKS_PER_SM)
wgmma_smem_smem_peak(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                     float* __restrict__ out, int n_batches) {
    extern __shared__ __align__(1024) unsigned char smem[];  // a swizzle atom must be 1 KB aligned
    __nv_bfloat16* a_smem = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* b_smem = a_smem + TILE * TILE;
    load_tile(a_smem, a);
    load_tile(b_smem, b);
    fence_proxy_async();
    __syncthreads();

    const int group_row0 = threadIdx.x / 128 * GROUP_ROWS;
    float s_acc[TILE / 8][4];
    // unroll 1: one batch per trip, so the SASS shows exactly the BATCH wgmmas of one.
#pragma unroll 1
    for (int batch = 0; batch < n_batches; ++batch) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BATCH; ++kk) {
            wgmma_smem_smem(s_acc, smem_descriptor(a_smem, group_row0, kk * WGMMA_K),
                            smem_descriptor(b_smem, 0, kk * WGMMA_K), kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        pin_registers(s_acc);
    }
    store_accumulators(out, s_acc);
}

// O += P V, P from registers and V transposed from shared memory: chapter 9's O += P V, the same P and V
// every batch, so after n_batches O is n_batches times P V.
__global__ void __launch_bounds__(N_THREADS, BLOCKS_PER_SM)
wgmma_regs_smem_peak(const __nv_bfloat16* __restrict__ p, const __nv_bfloat16* __restrict__ v,
                     float* __restrict__ out, int n_batches) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __nv_bfloat16* v_smem = reinterpret_cast<__nv_bfloat16*>(smem);
    load_tile(v_smem, v);
    fence_proxy_async();
    __syncthreads();

    // P's A fragments, as chapter 9 packs them from S: for key block kk, rows g and g + 8 of this warp's 16,
    // columns 16kk + 2t, 2t + 1 and then 8 columns on; neighbours in a row-major P, so one 32-bit load each.
    // Two row pointers and constant offsets: 32 separate addresses would not fit beside the accumulators.
    const int warp_row0 = threadIdx.x / 32 * 16, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const unsigned* row_g = reinterpret_cast<const unsigned*>(&p[(warp_row0 + g) * TILE + 2 * t]);
    const unsigned* row_g8 = row_g + 8 * TILE / 2;
    unsigned p_frag[BATCH][4];
#pragma unroll
    for (int kk = 0; kk < BATCH; ++kk) {
        p_frag[kk][0] = row_g[kk * WGMMA_K / 2];
        p_frag[kk][1] = row_g8[kk * WGMMA_K / 2];
        p_frag[kk][2] = row_g[(kk * WGMMA_K + 8) / 2];
        p_frag[kk][3] = row_g8[(kk * WGMMA_K + 8) / 2];
    }

    float o_acc[TILE / 8][4] = {};
#pragma unroll 1
    for (int batch = 0; batch < n_batches; ++batch) {
        pin_registers(o_acc);
        pin_registers(p_frag);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BATCH; ++kk) wgmma_regs_smem(o_acc, p_frag[kk], smem_descriptor(v_smem, kk * WGMMA_K, 0));
        wgmma_commit();
        wgmma_wait<0>();
        pin_registers(o_acc);
    }
    store_accumulators(out, o_acc);
}
