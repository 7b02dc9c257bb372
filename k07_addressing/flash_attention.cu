// Chapter 7: swizzled fragment addresses for the price of one XOR.
//
// Every ldmatrix address goes through smem_index(), whose swizzle the compiler cannot fold into the
// instruction's constant offset, so kernel 6 spends integer instructions on addresses in every tile. But
// a lane's row % 8 is the same in every block (blocks start at multiples of 8 rows), and a block's first
// column col0 (a multiple of 16 values, 32 bytes) only flips address bits 5-7. So a lane's address in
// any block is its address in block (0, 0), XORed with col0's byte offset, plus row0 whole rows: one XOR
// per column block, and the rows fold into ldmatrix's constant offset.
// In the diff: block_address(), the ldmatrix wrappers taking shared addresses, and aligned_smem(),
// which starts the tiles where that XOR is right.
// Left for later: the per-tile overheads (8), which is where these cheaper addresses pay most.
//
// One block computes BLOCK_Q query rows of one (batch, head); each of its N_WARPS warps owns 16 of them.
// q and o are (batch, seq_len_q, n_heads, HEAD_DIM), k and v (batch, seq_len_k, n_kv_heads, HEAD_DIM).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

constexpr int HEAD_DIM = 128;
constexpr int BLOCK_Q = 128;   // query rows per block
constexpr int BLOCK_KV = 64;   // key/value rows per step of the main loop
constexpr int N_WARPS = 8;
constexpr int N_THREADS = N_WARPS * 32;
constexpr int MMA_M = 16;  // one mma.sync.m16n8k16: an (MMA_M, MMA_K) x (MMA_K, MMA_N) product per warp
constexpr int MMA_N = 8;
constexpr int MMA_K = 16;
constexpr int WARP_Q = BLOCK_Q / N_WARPS;  // 16 = MMA_M: one mma row tile per warp
constexpr int CHUNK = 8;                   // 16-bit elements in one 16-byte vector
constexpr int STAGES = 2;                  // shared-memory buffers for each of K and V
constexpr int SMEM_ALIGN = 1024;           // bytes: where the tiles start (aligned_smem)
constexpr int ELEMENT_BYTES = 2;           // one bf16 or fp16 value
// Dynamic shared memory: what the kernel carves out of it, and the slack aligned_smem may skip.
constexpr int SMEM_BYTES = (BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * ELEMENT_BYTES +
                           SMEM_ALIGN;
static_assert(WARP_Q == MMA_M, "each warp owns one mma row tile of queries");
static_assert(STAGES == 2, "the stages trade roles after each tile (swap_stages): the loop is written for two");

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
// ---------------------------------------------------------------------------------------------------

// Chunk c of row r is stored at chunk c ^ (r % 8). Every access here stays inside one 16-byte chunk, so
// permuting whole chunks is invisible to the code that reads and writes them.
__device__ int smem_index(int row, int col) {
    return row * HEAD_DIM + ((col / CHUNK) ^ (row % 8)) * CHUNK + col % CHUNK;
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
__device__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(address));
}

__device__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(address));
}

// Every load below covers one (16, 16) block at (row0, col0): lane l points at row l % 16, column
// (l / 16) * 8, so the four matrices are top-left, bottom-left, top-right, bottom-right.

// This lane's shared-memory address in the block at (row0, col0), for row0 a multiple of 8 and col0 of 16.
// Its address in block (0, 0) is the same for every block of the tile (the compiler computes it once);
// col0 only XORs chunk bits, and row0 adds whole 256-byte rows.
template <typename T>
__device__ unsigned block_address(const T* tile, int row0, int col0) {
    const int lane = threadIdx.x % 32;
    const unsigned lane_address = __cvta_generic_to_shared(&tile[smem_index(lane % 16, lane / 16 * 8)]);
    return (lane_address ^ (col0 * sizeof(T))) + row0 * HEAD_DIM * sizeof(T);
}

// A operand: the (16, 16) tile at (row0, col0). Lane: rows g, g + 8 x columns 2t, 2t + 1, 2t + 8, 2t + 9.
// The four matrices are the four A registers in order.
template <typename T>
__device__ void load_a_frag(unsigned (&frag)[4], const T* tile, int row0, int col0) {
    ldmatrix_x4(frag[0], frag[1], frag[2], frag[3], block_address(tile, row0, col0));
}

// B operands of two n-tiles from a (16, 16) block stored (n, k), as K is (key, dim): frag[j] is rows
// row0 + 8j ... + 7. Lane: row g x columns 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9 (register 1).
// So n-tile 0 is (top-left, top-right) and n-tile 1 is (bottom-left, bottom-right).
template <typename T>
__device__ void load_b_frags(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    ldmatrix_x4(frag[0][0], frag[1][0], frag[0][1], frag[1][1], block_address(tile, row0, col0));
}

// The same from a block stored (k, n), as V is (key, dim): frag[j] is columns col0 + 8j ... + 7. Lane:
// column g x rows 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9 (register 1). .trans turns each matrix, and
// swapping the two middle registers (compared with K) turns the (2, 2) arrangement of matrices: n-tile 0
// is (top-left, bottom-left) and n-tile 1 is (top-right, bottom-right).
template <typename T>
__device__ void load_b_frags_transposed(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    ldmatrix_x4_trans(frag[0][0], frag[0][1], frag[1][0], frag[1][1], block_address(tile, row0, col0));
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

    // Q is read once: through shared memory into registers, where it stays for the whole loop. Tile 0's
    // K and V start copying behind it.
    load_tile<BLOCK_Q>(q_smem, q_head, q0, seq_len_q, q_stride);
    cp_async_commit();
    load_tile<BLOCK_KV>(k_smem, k_head, 0, seq_len_k, kv_stride);
    cp_async_commit();
    load_tile<BLOCK_KV>(v_smem, v_head, 0, seq_len_k, kv_stride);
    cp_async_commit();
    cp_async_wait<2>();  // Q has landed
    __syncthreads();
    unsigned q_frag[HEAD_DIM / MMA_K][4];
#pragma unroll
    for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
        load_a_frag(q_frag[mma_d], q_smem, warp_row0, mma_d * MMA_K);
    }

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
        // Publishes them to all warps, and tells that every warp is done with tile - 1, whose stage the
        // copies below refill. The only barrier of the loop.
        __syncthreads();
        if (tile + 1 < n_tiles) load_tile<BLOCK_KV>(next_k_tile, k_head, kv0 + BLOCK_KV, seq_len_k, kv_stride);
        cp_async_commit();  // on the last tile an empty group: harmless, the wait at the top waits for all
        if (tile + 1 < n_tiles) load_tile<BLOCK_KV>(next_v_tile, v_head, kv0 + BLOCK_KV, seq_len_k, kv_stride);
        cp_async_commit();

        // S = Q K^T for this warp's 16 rows x BLOCK_KV keys.
        float s_acc[BLOCK_KV / MMA_N][4] = {};
#pragma unroll
        for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; mma_n += 2) {  // two n-tiles, 16 keys, per load
                unsigned k_frag[2][2];
                load_b_frags(k_frag, k_tile, mma_n * MMA_N, mma_d * MMA_K);
                mma_m16n8k16<T>(s_acc[mma_n], q_frag[mma_d], k_frag[0]);
                mma_m16n8k16<T>(s_acc[mma_n + 1], q_frag[mma_d], k_frag[1]);
            }
        }

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

    // Normalise, convert to 16 bits and stage this warp's rows in q_smem (its Q is in registers now),
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
