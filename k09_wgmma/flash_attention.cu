// Chapter 9: S = Q K^T on Hopper's warpgroup matrix multiply (wgmma).
//
// wgmma is the instruction Hopper's tensor cores were built for (sm_90a only): a warpgroup of four warps
// issues one (64, 16) x (16, 128) product that reads both operands straight from shared memory, through
// descriptors, and runs until a wait. S = Q K^T moves onto it, so the ldmatrix loads of Q and K disappear,
// and every tile takes the layout wgmma reads: 64-column planes of 128-byte rows.
// In the diff: wgmma with its fence, commit and wait, descriptors, the planes, and a proxy fence.
// Left for later: P V on wgmma too (10).
//
// One block computes BLOCK_Q query rows of one (batch, head); each of its N_WARPS warps owns 16 of them.
// q and o are (batch, seq_len_q, n_heads, HEAD_DIM), k and v (batch, seq_len_k, n_kv_heads, HEAD_DIM).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

constexpr int HEAD_DIM = 128;
constexpr int BLOCK_Q = 128;   // query rows per block
constexpr int BLOCK_KV = 128;  // key/value rows per step of the main loop
constexpr int N_WARPS = 8;
constexpr int N_THREADS = N_WARPS * 32;
constexpr int MMA_M = 16;  // one mma.sync.m16n8k16: an (MMA_M, MMA_K) x (MMA_K, MMA_N) product per warp
constexpr int MMA_N = 8;
constexpr int MMA_K = 16;
constexpr int WARP_Q = BLOCK_Q / N_WARPS;  // 16 = MMA_M: one mma row tile per warp
constexpr int GROUP_Q = 4 * WARP_Q;        // 64: the rows of one warpgroup, the M of every wgmma
constexpr int CHUNK = 8;                   // 16-bit elements in one 16-byte vector
constexpr int STAGES = 2;                  // shared-memory buffers for each of K and V
constexpr int SMEM_ALIGN = 1024;           // bytes: where the tiles start (aligned_smem)
constexpr int PLANE = 64;                  // columns in one plane of a tile: 128 bytes per row
constexpr int ELEMENT_BYTES = 2;           // one bf16 or fp16 value
// Dynamic shared memory: what the kernel carves out of it, and the slack aligned_smem may skip.
constexpr int SMEM_BYTES = (BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * ELEMENT_BYTES +
                           SMEM_ALIGN;
static_assert(SMEM_BYTES <= 227 * 1024, "SMEM_BYTES fits in one block's shared memory on Hopper");
static_assert(WARP_Q == MMA_M, "each warp owns one mma row tile of queries");
static_assert(STAGES == 2, "the stages trade roles after each tile (swap_stages): the loop is written for two");
static_assert(BLOCK_Q == BLOCK_KV, "Q, K and V tiles share one layout");

// ---------------------------------------------------------------------------------------------------
// Element-type helpers: the tensor-core instructions and the fp32 -> 16-bit conversion differ by type.
// ---------------------------------------------------------------------------------------------------

// D += A * B for one (16, 16) x (16, 8) tile, accumulated in fp32 by the whole warp.
template <typename T>
__device__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);

template <>
__device__ void mma_m16n8k16<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ void mma_m16n8k16<__half>(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The 64 fp32 accumulators of one thread in a (64, 128) wgmma tile, as asm operands. Their layout is
// mma.sync's: in n-tile n (columns 8n ... 8n + 7) a lane holds rows g, g + 8 of its warp's 16 rows and
// columns 2t, 2t + 1 (g = lane / 4, t = lane % 4), so the softmax below is kernel 8's, unchanged.
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

// D (+)= A * B for one (64, 16) x (16, 128) step, A and B both in shared memory. The warpgroup issues it
// together; it only starts the work: the result is there after wgmma_wait. K-major B: B is stored (n, k),
// as K is (key, dim). When accumulate is 0, D is overwritten, so D needs no zeroing first.
template <typename T>
__device__ void wgmma_smem_smem(float (&d)[16][4], unsigned long long a_desc, unsigned long long b_desc,
                                int accumulate);

template <>
__device__ void wgmma_smem_smem<__nv_bfloat16>(float (&d)[16][4], unsigned long long a_desc, unsigned long long b_desc,
                                               int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " ACCUMULATORS ", %64, %65, p, 1, 1, 0, 0;\n}"
                 : ACCUMULATOR_OPERANDS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
}

template <>
__device__ void wgmma_smem_smem<__half>(float (&d)[16][4], unsigned long long a_desc, unsigned long long b_desc,
                                        int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " ACCUMULATORS ", %64, %65, p, 1, 1, 0, 0;\n}"
                 : ACCUMULATOR_OPERANDS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
}

// Registers written by ordinary instructions must be fenced before a wgmma reads them.
__device__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

// Close the wgmmas issued so far into one group, and wait until at most N groups are in flight.
__device__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The compiler sees a wgmma's registers used when it is issued, not when it runs. An empty asm that
// "rewrites" each of them pins the code around it: nothing that reads or writes them moves across. Pinned
// after wgmma_wait, every ordinary access to them comes after it.
template <int N>
__device__ void pin_registers(float (&regs)[N][4]) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(regs[n][i])::"memory");
    }
}

// 2^x with the hardware's approximate exponential (one MUFU.EX2); 2^-inf = 0.
__device__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Two fp32 values -> one register of two 16-bit values (one conversion instruction for the pair).
template <typename T>
__device__ unsigned pack_floats(float lo, float hi);

template <>
__device__ unsigned pack_floats<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&pair);
}

template <>
__device__ unsigned pack_floats<__half>(float lo, float hi) {
    __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&pair);
}

// ---------------------------------------------------------------------------------------------------
// Shared memory: a tile is (rows, HEAD_DIM) of 16-bit values, row-major, its 16-byte chunks swizzled.
// Its columns are split into two planes of 64, one after the other: wgmma's 128-byte swizzle layout.
// ---------------------------------------------------------------------------------------------------

// Chunk c of row r is stored at chunk c ^ (r % 8). Every access here stays inside one 16-byte chunk, so
// permuting whole chunks is invisible to the code that reads and writes them. In a plane, whose rows are
// 128 bytes, rows r and r + 8 share their pattern: (8-row, 1 KB) swizzle atoms, which must be 1 KB aligned.
__device__ int smem_index(int row, int col) {
    return col / PLANE * BLOCK_KV * PLANE + row * PLANE + ((col % PLANE / CHUNK) ^ (row % 8)) * CHUNK + col % CHUNK;
}

// The dynamic shared memory, its start rounded up to SMEM_ALIGN bytes (SMEM_BYTES holds SMEM_ALIGN bytes
// more than the tiles take). block_address() XORs absolute shared-memory addresses, which is right only if
// each tile starts with the XORed bits clear; the tiles are whole multiples of 1 KB, so an aligned start
// is enough. __align__ on an extern array does not promise where a block's dynamic shared memory begins,
// so the kernel rounds it up itself.
__device__ unsigned char* aligned_smem(unsigned char* smem) {
    const unsigned address = __cvta_generic_to_shared(smem);
    return smem + (SMEM_ALIGN - address % SMEM_ALIGN) % SMEM_ALIGN;
}

// cp.async: a 16-byte global -> shared copy that does not pass through registers or block the thread.
// .cg caches it in L2 only: each tile is read once per block, so L1 would only be polluted. When
// src_bytes is 0 nothing is read and the 16 bytes are zero-filled.
__device__ void cp_async_16(void* smem_to, const void* gmem_from, int src_bytes) {
    const unsigned smem_address = __cvta_generic_to_shared(smem_to);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address), "l"(gmem_from), "r"(src_bytes));
}

// Close the batch of copies issued so far into one group.
__device__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;");
}

// Wait until at most N of this thread's groups are still in flight. Other threads' copies are only
// visible after a barrier as well.
template <int N>
__device__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// wgmma reads shared memory through the async proxy: a thread's cp.async writes reach it only after this fence.
__device__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Copy rows [row0, row0 + BLOCK_ROWS) of one head into shared memory with 16-byte copies. 16 threads cover
// one 256-byte row, so a warp moves a (2, 128) tile (four whole 128-byte lines) per instruction. Rows at
// or past seq_len become zeros: a zero V row times a zero probability stays zero, never NaN.
template <int BLOCK_ROWS, typename T>
__device__ void load_tile(T* tile, const T* head, int row0, int seq_len, int row_stride) {
    constexpr int CHUNKS_PER_ROW = HEAD_DIM / CHUNK;
    static_assert(BLOCK_ROWS * CHUNKS_PER_ROW % N_THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int step = 0; step < BLOCK_ROWS * CHUNKS_PER_ROW / N_THREADS; ++step) {
        const int chunk = step * N_THREADS + threadIdx.x;
        const int row = chunk / CHUNKS_PER_ROW;
        const int col = chunk % CHUNKS_PER_ROW * CHUNK;
        const bool in_range = row0 + row < seq_len;
        // Out of range: copy 0 bytes (zero fill) from row 0, an address that is always valid.
        const T* from = &head[(long long)(in_range ? row0 + row : 0) * row_stride + col];
        cp_async_16(&tile[smem_index(row, col)], from, in_range ? 16 : 0);
    }
}

// After a tile the two stages trade roles: the one just read is the next copy's target, and the one just
// filled is read next.
template <typename T>
__device__ void swap_stages(T*& a, T*& b) {
    T* const was_a = a;
    a = b;
    b = was_a;
}

// ---------------------------------------------------------------------------------------------------
// Shared memory -> mma fragments. With g = lane / 4 and t = lane % 4, a lane owns, in every (8, 8)
// piece of an operand, row g and the column pair 2t, 2t + 1.
// ---------------------------------------------------------------------------------------------------

// ldmatrix x4: lanes 8i ... 8i + 7 give the addresses of the 8 rows of matrix i; register i of every lane
// receives that lane's pair of matrix i. With .trans each matrix arrives transposed.
__device__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(address));
}

// Every load below covers one (16, 16) block at (row0, col0): lane l points at row l % 16, column
// (l / 16) * 8, so the four matrices are top-left, bottom-left, top-right, bottom-right.

// This lane's shared-memory address in the block at (row0, col0), for row0 a multiple of 8 and col0 of 16.
// Its address in block (0, 0) is the same for every block of the tile (the compiler computes it once);
// col0 XORs chunk bits inside a plane and adds whole planes, and row0 adds whole 128-byte rows.
template <typename T>
__device__ unsigned block_address(const T* tile, int row0, int col0) {
    const int lane = threadIdx.x % 32;
    const unsigned lane_address = __cvta_generic_to_shared(&tile[smem_index(lane % 16, lane / 16 * 8)]);
    return (lane_address ^ (col0 % PLANE * sizeof(T))) + (col0 / PLANE * BLOCK_KV + row0) * PLANE * sizeof(T);
}

// B fragments from a block stored (k, n), as V is (key, dim): frag[j] is columns col0 + 8j ... + 7. Lane:
// column g x rows 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9 (register 1). .trans turns each matrix, and
// the register order, frag[0]'s two registers then frag[1]'s, turns the (2, 2) arrangement of matrices: n-tile 0
// is (top-left, bottom-left) and n-tile 1 is (top-right, bottom-right).
template <typename T>
__device__ void load_b_frags_transposed(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    ldmatrix_x4_trans(frag[0][0], frag[0][1], frag[1][0], frag[1][1], block_address(tile, row0, col0));
}

// ---------------------------------------------------------------------------------------------------
// Shared memory -> wgmma: a 64-bit descriptor per operand instead of ldmatrix fragments.
// ---------------------------------------------------------------------------------------------------

// The descriptor of the (rows, 16)-or-(16, columns) block whose corner is element (row0, col0) of a tile,
// row0 a multiple of 8 and col0 of 16: its start address is the corner's, where the swizzle is the
// identity (the hardware applies the XOR itself, from the address bits). Two strides say where the rest
// is: 1 KB from one 8-row atom to the next, and 16 KB (one plane) from one 64 columns to the next. The
// latter matters only when a B operand is read transposed, across both planes (V); for K-major operands
// (Q, K) every 16 columns lie inside one plane. Addresses and strides are stored in 16-byte units.
template <typename T>
__device__ unsigned long long smem_descriptor(const T* tile, int row0, int col0) {
    const unsigned address = __cvta_generic_to_shared(&tile[smem_index(row0, col0)]);
    constexpr unsigned long long PLANE_BYTES = BLOCK_KV * PLANE * sizeof(T), ATOM_BYTES = 8 * PLANE * sizeof(T);
    constexpr unsigned long long SWIZZLE_128B = 1;
    return (address >> 4) | (PLANE_BYTES >> 4) << 16 | (ATOM_BYTES >> 4) << 32 | SWIZZLE_128B << 62;
}

// ---------------------------------------------------------------------------------------------------
// The kernel. Grid: (query tiles, heads, batch); one block of N_THREADS threads per query tile.
// ---------------------------------------------------------------------------------------------------

template <typename T, bool CAUSAL>
__global__ void __launch_bounds__(N_THREADS)
flash_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                int seq_len_q, int seq_len_k, int n_heads, int n_kv_heads, float softmax_scale) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* q_smem = reinterpret_cast<T*>(aligned_smem(smem));
    T* k_smem = q_smem + BLOCK_Q * HEAD_DIM;          // STAGES tiles
    T* v_smem = k_smem + STAGES * BLOCK_KV * HEAD_DIM;  // STAGES tiles
    static_assert((BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * sizeof(T) +
                      SMEM_ALIGN <= SMEM_BYTES,
                  "the carve-up above fits in SMEM_BYTES");

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int q0 = blockIdx.x * BLOCK_Q;
    const int warp_row0 = warp * WARP_Q;  // this warp's first row inside the block's tiles
    const int group_row0 = warp / 4 * GROUP_Q;  // and its warpgroup's
    // Grouped heads (GQA, or MQA with one K/V head): n_heads / n_kv_heads query heads in a row share one
    // K/V head. Only the K and V pointers see it.
    const int head = blockIdx.y, kv_head = head / (n_heads / n_kv_heads);
    const int q_stride = n_heads * HEAD_DIM, kv_stride = n_kv_heads * HEAD_DIM;  // from one row to the next
    const long long q_offset = ((long long)blockIdx.z * seq_len_q * n_heads + head) * HEAD_DIM;
    const long long kv_offset = ((long long)blockIdx.z * seq_len_k * n_kv_heads + kv_head) * HEAD_DIM;
    const T* q_head = q + q_offset;
    const T* k_head = k + kv_offset;
    const T* v_head = v + kv_offset;
    T* o_head = o + q_offset;
    // Causal is aligned bottom-right, as for queries against a KV cache: the queries are the last seq_len_q
    // of seq_len_k positions, so query i sees keys 0 ... i + causal_offset (>= 0 when causal: the caller checks).
    const int causal_offset = seq_len_k - seq_len_q;

    // Causal: tiles wholly above the diagonal are skipped (the block's last query sees up to key
    // q0 + BLOCK_Q - 1 + causal_offset). Tile 0 always holds key 0, visible to every query, so each row's
    // max is finite from the first tile on and exp() never sees inf - inf.
    const int n_keys = CAUSAL ? min(seq_len_k, q0 + BLOCK_Q + causal_offset) : seq_len_k;
    const int n_tiles = (n_keys + BLOCK_KV - 1) / BLOCK_KV;

    // Q stays in shared memory, where every tile's wgmma reads it once it has landed. Tile 0's
    // K and V start copying behind it.
    load_tile<BLOCK_Q>(q_smem, q_head, q0, seq_len_q, q_stride);
    cp_async_commit();
    load_tile<BLOCK_KV>(k_smem, k_head, 0, seq_len_k, kv_stride);
    cp_async_commit();
    load_tile<BLOCK_KV>(v_smem, v_head, 0, seq_len_k, kv_stride);
    cp_async_commit();

    // Per thread: O rows g and g + 8 of this warp (index 2h + i is row g + 8h), and for those two rows
    // the running max (in base-2 units: times scale * log2(e)) and this thread's part of the running sum.
    const float scale_log2 = softmax_scale * 1.4426950408889634f;
    float o_acc[HEAD_DIM / MMA_N][4] = {};
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
    float row_sum[2] = {0.0f, 0.0f};

    // Stage pointers, not a stage index: with tile % STAGES the compiler folds the stage into the bits of
    // every swizzled address and rebuilds them all in every tile. A pointer leaves each lane's offsets
    // fixed for the whole loop; only the base they are added to changes.
    T* k_tile = k_smem;
    T* v_tile = v_smem;
    T* next_k_tile = k_smem + BLOCK_KV * HEAD_DIM;
    T* next_v_tile = v_smem + BLOCK_KV * HEAD_DIM;
    for (int tile = 0; tile < n_tiles; ++tile) {
        const int kv0 = tile * BLOCK_KV;
        cp_async_wait<0>();  // this tile's K and V have landed: they were issued a whole tile ago
        fence_proxy_async();
        // Publishes them to all warps, and tells that every warp is done with tile - 1, whose stage the
        // copies below refill. The only barrier of the loop.
        __syncthreads();
        if (tile + 1 < n_tiles) load_tile<BLOCK_KV>(next_k_tile, k_head, kv0 + BLOCK_KV, seq_len_k, kv_stride);
        cp_async_commit();  // on the last tile an empty group: harmless, the wait at the top waits for all
        if (tile + 1 < n_tiles) load_tile<BLOCK_KV>(next_v_tile, v_head, kv0 + BLOCK_KV, seq_len_k, kv_stride);
        cp_async_commit();

        // S = Q K^T for this warpgroup's 64 rows x BLOCK_KV keys: one wgmma per 16 columns of HEAD_DIM.
        float s_acc[BLOCK_KV / MMA_N][4];
        wgmma_fence();
#pragma unroll
        for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
            wgmma_smem_smem<T>(s_acc, smem_descriptor(q_smem, group_row0, mma_d * MMA_K),
                               smem_descriptor(k_tile, 0, mma_d * MMA_K), mma_d > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        pin_registers(s_acc);

        // Keys past the end, and keys past the query's diagonal when causal, get no weight.
        if (kv0 + BLOCK_KV > seq_len_k || (CAUSAL && kv0 + BLOCK_KV - 1 > q0 + warp_row0 + causal_offset)) {
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; ++mma_n) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int key = kv0 + mma_n * MMA_N + 2 * t + i % 2;
                    const int query = q0 + warp_row0 + g + 8 * (i / 2);
                    if (key >= seq_len_k || (CAUSAL && key > query + causal_offset)) s_acc[mma_n][i] = -CUDART_INF_F;
                }
            }
        }

        // Online softmax: a larger max rescales what O and the sum hold so far.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float tile_max = -CUDART_INF_F;
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; ++mma_n) {
                tile_max = fmaxf(tile_max, fmaxf(s_acc[mma_n][2 * h], s_acc[mma_n][2 * h + 1]));
            }
            // The 4 lanes t = 0..3 of a group hold one row between them.
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 2));
            const float new_max = fmaxf(row_max[h], tile_max * scale_log2);
            const float rescale = fast_exp2(row_max[h] - new_max);
            row_max[h] = new_max;
            row_sum[h] *= rescale;
#pragma unroll
            for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
                o_acc[mma_n][2 * h] *= rescale;
                o_acc[mma_n][2 * h + 1] *= rescale;
            }
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; ++mma_n) {
#pragma unroll
                for (int i = 2 * h; i < 2 * h + 2; ++i) {
                    s_acc[mma_n][i] = fast_exp2(fmaf(s_acc[mma_n][i], scale_log2, -new_max));
                    row_sum[h] += s_acc[mma_n][i];
                }
            }
        }

        // P to 16 bits. The accumulators of n-tiles 2 mma_kv and 2 mma_kv + 1 are exactly the A fragment
        // of key block mma_kv, so P never leaves the registers.
        unsigned p_frag[BLOCK_KV / MMA_K][4];
#pragma unroll
        for (int mma_kv = 0; mma_kv < BLOCK_KV / MMA_K; ++mma_kv) {
            p_frag[mma_kv][0] = pack_floats<T>(s_acc[2 * mma_kv][0], s_acc[2 * mma_kv][1]);
            p_frag[mma_kv][1] = pack_floats<T>(s_acc[2 * mma_kv][2], s_acc[2 * mma_kv][3]);
            p_frag[mma_kv][2] = pack_floats<T>(s_acc[2 * mma_kv + 1][0], s_acc[2 * mma_kv + 1][1]);
            p_frag[mma_kv][3] = pack_floats<T>(s_acc[2 * mma_kv + 1][2], s_acc[2 * mma_kv + 1][3]);
        }

        // O += P V.
#pragma unroll
        for (int mma_kv = 0; mma_kv < BLOCK_KV / MMA_K; ++mma_kv) {
#pragma unroll
            for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; mma_n += 2) {  // two n-tiles, 16 dims, per load
                unsigned v_frag[2][2];
                load_b_frags_transposed(v_frag, v_tile, mma_kv * MMA_K, mma_n * MMA_N);
                mma_m16n8k16<T>(o_acc[mma_n], p_frag[mma_kv], v_frag[0]);
                mma_m16n8k16<T>(o_acc[mma_n + 1], p_frag[mma_kv], v_frag[1]);
            }
        }
        swap_stages(k_tile, next_k_tile);
        swap_stages(v_tile, next_v_tile);
    }

    // Normalise, convert to 16 bits and stage this warp's rows in q_smem (no wgmma reads it any more),
    // so that the global writes can be whole 16-byte vectors instead of 4-byte pairs.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        row_sum[h] += __shfl_xor_sync(0xffffffff, row_sum[h], 1);
        row_sum[h] += __shfl_xor_sync(0xffffffff, row_sum[h], 2);
        const float inverse_sum = 1.0f / row_sum[h];
#pragma unroll
        for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
            const unsigned pair =
                pack_floats<T>(o_acc[mma_n][2 * h] * inverse_sum, o_acc[mma_n][2 * h + 1] * inverse_sum);
            *reinterpret_cast<unsigned*>(&q_smem[smem_index(warp_row0 + g + 8 * h, mma_n * MMA_N + 2 * t)]) = pair;
        }
    }
    __syncwarp();
    constexpr int CHUNKS_PER_ROW = HEAD_DIM / CHUNK;
#pragma unroll
    for (int step = 0; step < WARP_Q * CHUNKS_PER_ROW / 32; ++step) {
        const int chunk = step * 32 + lane;
        const int row = warp_row0 + chunk / CHUNKS_PER_ROW;
        const int col = chunk % CHUNKS_PER_ROW * CHUNK;
        if (q0 + row < seq_len_q) {
            *reinterpret_cast<uint4*>(&o_head[(long long)(q0 + row) * q_stride + col]) =
                *reinterpret_cast<const uint4*>(&q_smem[smem_index(row, col)]);
        }
    }
}
