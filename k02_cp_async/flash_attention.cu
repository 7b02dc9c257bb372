// Chapter 2: asynchronous global -> shared copies with cp.async.
//
// Kernel 1's copies pass every 16-byte vector through a register, and the thread stalls on the load
// before it can store. cp.async copies global -> shared directly and lets the thread go on; a commit
// group closes a batch of copies and wait_group blocks until a batch has landed. So the V tile can now
// arrive while Q K^T and the softmax run on the K tile.
// In the diff: three cp.async wrappers, the body of load_tile(), and a commit or wait after each copy.
// Left for later: ldmatrix (3), a swizzled layout (4), the next tile's copy under this tile's math (5).
//
// One block computes BLOCK_Q query rows of one (batch, head); each of its N_WARPS warps owns 16 of them.
// q and o are (batch, seq_len_q, n_heads, HEAD_DIM), k and v (batch, seq_len_k, n_kv_heads, HEAD_DIM).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

constexpr int HEAD_DIM = 128;
constexpr int BLOCK_Q = 64;    // query rows per block
constexpr int BLOCK_KV = 64;   // key/value rows per step of the main loop
constexpr int N_WARPS = 4;
constexpr int N_THREADS = N_WARPS * 32;
constexpr int MMA_M = 16;  // one mma.sync.m16n8k16: an (MMA_M, MMA_K) x (MMA_K, MMA_N) product per warp
constexpr int MMA_N = 8;
constexpr int MMA_K = 16;
constexpr int WARP_Q = BLOCK_Q / N_WARPS;  // 16 = MMA_M: one mma row tile per warp
constexpr int CHUNK = 8;                   // 16-bit elements in one 16-byte vector
constexpr int ELEMENT_BYTES = 2;           // one bf16 or fp16 value
// Dynamic shared memory: what the kernel carves out of it.
constexpr int SMEM_BYTES = (BLOCK_Q + 2 * BLOCK_KV) * HEAD_DIM * ELEMENT_BYTES;
static_assert(WARP_Q == MMA_M, "each warp owns one mma row tile of queries");

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
// Shared memory: a tile is (rows, HEAD_DIM) of 16-bit values, row-major.
// ---------------------------------------------------------------------------------------------------

__device__ int smem_index(int row, int col) {
    return row * HEAD_DIM + col;
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

// ---------------------------------------------------------------------------------------------------
// Shared memory -> mma fragments. With g = lane / 4 and t = lane % 4, a lane owns, in every (8, 8)
// piece of an operand, row g and the column pair 2t, 2t + 1.
// ---------------------------------------------------------------------------------------------------

__device__ unsigned load_pair(const void* address) {
    return *reinterpret_cast<const unsigned*>(address);
}

// A operand: the (16, 16) tile at (row0, col0). Lane: rows g, g + 8 x columns 2t, 2t + 1, 2t + 8, 2t + 9.
template <typename T>
__device__ void load_a_frag(unsigned (&frag)[4], const T* tile, int row0, int col0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    frag[0] = load_pair(&tile[smem_index(row0 + g, col0 + 2 * t)]);
    frag[1] = load_pair(&tile[smem_index(row0 + g + 8, col0 + 2 * t)]);
    frag[2] = load_pair(&tile[smem_index(row0 + g, col0 + 2 * t + 8)]);
    frag[3] = load_pair(&tile[smem_index(row0 + g + 8, col0 + 2 * t + 8)]);
}

// B operands of two n-tiles from a (16, 16) block stored (n, k), as K is (key, dim): frag[j] is rows
// row0 + 8j ... + 7. Lane: row g x columns 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9 (register 1).
template <typename T>
__device__ void load_b_frags(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        frag[j][0] = load_pair(&tile[smem_index(row0 + 8 * j + g, col0 + 2 * t)]);
        frag[j][1] = load_pair(&tile[smem_index(row0 + 8 * j + g, col0 + 2 * t + 8)]);
    }
}

// The same from a block stored (k, n), as V is (key, dim): frag[j] is columns col0 + 8j ... + 7. Lane:
// column g x rows 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9 (register 1). The two values of a register
// sit in different rows, so each register takes two 16-bit loads.
template <typename T>
__device__ void load_b_frags_transposed(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const unsigned short* bits = reinterpret_cast<const unsigned short*>(tile);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = row0 + 2 * t + 8 * half, col = col0 + 8 * j + g;
            frag[j][half] = bits[smem_index(row, col)] | (unsigned)bits[smem_index(row + 1, col)] << 16;
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The kernel. Grid: (query tiles, heads, batch); one block of N_THREADS threads per query tile.
// ---------------------------------------------------------------------------------------------------

template <typename T, bool CAUSAL>
__global__ void __launch_bounds__(N_THREADS)
flash_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                int seq_len_q, int seq_len_k, int n_heads, int n_kv_heads, float softmax_scale) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* q_smem = reinterpret_cast<T*>(smem);
    T* k_smem = q_smem + BLOCK_Q * HEAD_DIM;
    T* v_smem = k_smem + BLOCK_KV * HEAD_DIM;
    static_assert((BLOCK_Q + 2 * BLOCK_KV) * HEAD_DIM * sizeof(T) <= SMEM_BYTES, "the carve-up above fits in SMEM_BYTES");

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

    // Q is read once: through shared memory into registers, where it stays for the whole loop.
    load_tile<BLOCK_Q>(q_smem, q_head, q0, seq_len_q, q_stride);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    unsigned q_frag[HEAD_DIM / MMA_K][4];
#pragma unroll
    for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
        load_a_frag(q_frag[mma_d], q_smem, warp_row0, mma_d * MMA_K);
    }

    // Per thread: O rows g and g + 8 of this warp (index 2h + i is row g + 8h), and for those two rows
    // the running max (already scaled) and this thread's part of the running sum.
    float o_acc[HEAD_DIM / MMA_N][4] = {};
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
    float row_sum[2] = {0.0f, 0.0f};

    // Causal: tiles wholly above the diagonal are skipped (the block's last query sees up to key
    // q0 + BLOCK_Q - 1 + causal_offset). Tile 0 always holds key 0, visible to every query, so each row's
    // max is finite from the first tile on and exp() never sees inf - inf.
    const int n_keys = CAUSAL ? min(seq_len_k, q0 + BLOCK_Q + causal_offset) : seq_len_k;
    const int n_tiles = (n_keys + BLOCK_KV - 1) / BLOCK_KV;
    for (int tile = 0; tile < n_tiles; ++tile) {
        const int kv0 = tile * BLOCK_KV;
        load_tile<BLOCK_KV>(k_smem, k_head, kv0, seq_len_k, kv_stride);
        cp_async_commit();
        load_tile<BLOCK_KV>(v_smem, v_head, kv0, seq_len_k, kv_stride);
        cp_async_commit();
        cp_async_wait<1>();  // K has landed; V may still be in flight while S and the softmax run
        __syncthreads();

        // S = Q K^T for this warp's 16 rows x BLOCK_KV keys.
        float s_acc[BLOCK_KV / MMA_N][4] = {};
#pragma unroll
        for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; mma_n += 2) {  // two n-tiles, 16 keys, per load
                unsigned k_frag[2][2];
                load_b_frags(k_frag, k_smem, mma_n * MMA_N, mma_d * MMA_K);
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
            const float new_max = fmaxf(row_max[h], tile_max * softmax_scale);
            const float rescale = __expf(row_max[h] - new_max);
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
                    s_acc[mma_n][i] = __expf(s_acc[mma_n][i] * softmax_scale - new_max);
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
        cp_async_wait<0>();  // V has landed
        __syncthreads();
#pragma unroll
        for (int mma_kv = 0; mma_kv < BLOCK_KV / MMA_K; ++mma_kv) {
#pragma unroll
            for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; mma_n += 2) {  // two n-tiles, 16 dims, per load
                unsigned v_frag[2][2];
                load_b_frags_transposed(v_frag, v_smem, mma_kv * MMA_K, mma_n * MMA_N);
                mma_m16n8k16<T>(o_acc[mma_n], p_frag[mma_kv], v_frag[0]);
                mma_m16n8k16<T>(o_acc[mma_n + 1], p_frag[mma_kv], v_frag[1]);
            }
        }
        __syncthreads();  // every warp is done with k_smem and v_smem before they are refilled
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
