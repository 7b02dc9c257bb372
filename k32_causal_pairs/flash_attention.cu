// Chapter 32: causal too, the two blocks of a cluster share each K and V tile, and take turns at the longer one.
//
// Kernel 31 pairs its blocks in full attention alone: causal query tiles differ in length, and a pair in lockstep
// runs at the pace of its longer tile. Of two neighbouring causal tiles, though, the later one holds at most one
// key tile more. Here both blocks of a pair walk the later tile's key tiles, and the block on the earlier tile
// passes over the one it does not need; the blocks take the later tile in turns, so neither falls behind by more
// than the tile the stages absorb. And as causal tiles are not alike, a pair takes its work from the counter: its
// first block asks, and hands the item to the other with a store into its shared memory.
// In the diff: the work list of pairs, walk_tiles, pass_over, store_remote and receive.
//
// One block computes BLOCK_Q query rows of one (batch, K/V head); each of its two consumer warpgroups owns
// 64 of them, each warp 16. q and o are (batch, seq_len_q, n_heads, HEAD_DIM), k and v (batch, seq_len_k,
// n_kv_heads, HEAD_DIM).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

constexpr int HEAD_DIM = 128;
constexpr int BLOCK_Q = 128;   // query rows per block
constexpr int BLOCK_KV = 128;  // key/value rows per step of the main loop
constexpr int N_WARPS = 8;         // the consumers: two warpgroups that compute
constexpr int PRODUCER_WARPS = 4;  // and one warpgroup that copies
constexpr int N_THREADS = (N_WARPS + PRODUCER_WARPS) * 32;
// Registers per thread after the hand-over (setmaxnreg): the producer gives back what the consumers take.
// Every thread starts with the launch's allocation: for 384 threads at most 168 (65536 / 384, rounded down
// to the allocation step of 8), where __launch_bounds__ below holds ptxas. The producer's 128 threads then
// return 128 x (168 - 24) registers and the consumers' 256 take 256 x (240 - 168): the same 18,432.
constexpr int PRODUCER_REGISTERS = 24, CONSUMER_REGISTERS = 240;
static_assert(PRODUCER_REGISTERS * PRODUCER_WARPS * 32 + CONSUMER_REGISTERS * N_WARPS * 32 <= 65536,
              "the hand-over stays inside one SM's register file");
constexpr int MMA_M = 16;  // mma.sync.m16n8k16's tile: per warp, wgmma's fragments keep its layout
constexpr int MMA_N = 8;
constexpr int MMA_K = 16;
constexpr int WARP_Q = BLOCK_Q / N_WARPS;  // 16: the rows of a warp's slice of its warpgroup's tile
constexpr int GROUP_Q = 4 * WARP_Q;        // 64: the rows of one warpgroup, the M of every wgmma
constexpr int CHUNK = 8;                   // 16-bit elements in one 16-byte vector
constexpr int CHAINS = 8;                  // independent chains in each row's max and sum
constexpr int STAGES = 2;                  // shared-memory buffers for each of K and V
constexpr int SMEM_ALIGN = 1024;           // bytes: where the tiles start (aligned_smem)
constexpr int PLANE = 64;                  // columns in one plane of a tile: 128 bytes per row
constexpr int Q_TILES = 3;  // (BLOCK_Q, HEAD_DIM) tiles in shared memory: two buffers of Q, and O on its way out
// mbarriers after the tiles: per Q buffer and stage of K and V, filled and free; per Q buffer, a pair's item handed over
constexpr int N_BARRIERS = 6 + 4 * STAGES;
constexpr int ELEMENT_BYTES = 2;           // one bf16 or fp16 value
constexpr int MBARRIER_BYTES = 8;          // one mbarrier, an unsigned long long
constexpr int V_ZEROED = 1;                // the named barrier after the V rows past a sequence's end are zeroed
constexpr int TURN = 2;                    // named barriers TURN + w: consumer warpgroup w's turn on the tensor cores
constexpr int O_STAGED = 4;                // named barriers O_STAGED + w: warpgroup w's O rows staged, or free to stage
constexpr int WORK_SLOT_BYTES = 44;        // a query tile's work item, decoded (Work), from producer to consumers
constexpr int ITEM_BYTES = 4;              // a work item's number, handed from one block of a pair to the other
constexpr int HEADS_AT_ONCE = 4;           // (batch, K/V head) units whose query tiles the work list interleaves,
constexpr int KV_IN_L2_BYTES = 16 << 20;   // or fewer, whose K and V together fit in this share of L2
constexpr int CLUSTER = 2;                 // blocks in a cluster: a pair that can share its K and V tiles
constexpr int PAIRED_KEYS = 4096;          // attention over this many keys or more pairs the blocks
// Dynamic shared memory: what the kernel carves out of it, and the slack aligned_smem may skip.
constexpr int SMEM_BYTES = (Q_TILES * BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * ELEMENT_BYTES +
                           N_BARRIERS * MBARRIER_BYTES + 2 * WORK_SLOT_BYTES + 2 * ITEM_BYTES +
                           SMEM_ALIGN;
static_assert(SMEM_BYTES <= 227 * 1024, "SMEM_BYTES fits in one block's shared memory on Hopper");
// The decode kernel (decode_attention): a query tile of at most DECODE_ROWS rows, one mma row tile, against key
// tiles of DECODE_KV keys, DECODE_KV / DECODE_WARPS to each warp, copied DECODE_STAGES - 1 tiles ahead. Its
// blocks are small, so DECODE_BLOCKS_PER_SM of them share an SM and keep more copies in flight.
constexpr int DECODE_ROWS = 16;
constexpr int DECODE_KV = 64;
constexpr int DECODE_WARPS = 4;
constexpr int DECODE_THREADS = DECODE_WARPS * 32;
constexpr int DECODE_STAGES = 3;
constexpr int DECODE_BLOCKS_PER_SM = 2;
constexpr int DECODE_SMEM_BYTES = (DECODE_ROWS + 2 * DECODE_STAGES * DECODE_KV) * HEAD_DIM * ELEMENT_BYTES + SMEM_ALIGN;
static_assert(DECODE_BLOCKS_PER_SM * DECODE_SMEM_BYTES <= 228 * 1024, "DECODE_BLOCKS_PER_SM blocks fit on one SM");
static_assert(BLOCK_KV / MMA_N % CHAINS == 0 && (CHAINS & (CHAINS - 1)) == 0,
              "every chain takes as many n-tiles, and the chains join pairwise");
static_assert(WARP_Q == MMA_M, "each warp owns one mma row tile of queries");
static_assert(BLOCK_Q == BLOCK_KV, "Q, K and V tiles share one layout");

// ---------------------------------------------------------------------------------------------------
// Element-type helpers: the tensor-core instructions and the fp32 -> 16-bit conversion differ by type.
// ---------------------------------------------------------------------------------------------------

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

// D += A * B for one (64, 16) x (16, 128) step, A in registers (the mma.sync A-fragment layout, per warp)
// and B in shared memory stored (k, n), as V is (key, dim): the final 1 tells the hardware to transpose.
template <typename T>
__device__ void wgmma_regs_smem(float (&d)[16][4], const unsigned (&a)[4], unsigned long long b_desc);

template <>
__device__ void wgmma_regs_smem<__nv_bfloat16>(float (&d)[16][4], const unsigned (&a)[4], unsigned long long b_desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " ACCUMULATORS
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}"
                 : ACCUMULATOR_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

template <>
__device__ void wgmma_regs_smem<__half>(float (&d)[16][4], const unsigned (&a)[4], unsigned long long b_desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " ACCUMULATORS
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}"
                 : ACCUMULATOR_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
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
// before wgmma_fence, every ordinary access to them comes before the fence; after wgmma_wait, after it.
// One helper for the fp32 accumulators and the packed P pairs alike: each register is handed over as an
// fp32 operand, whose bits an empty asm leaves as they are. (As integer operands, the accumulators would
// need moves between wgmmas, and ptxas would serialize them.)
template <typename R, int N>
__device__ void pin_registers(R (&regs)[N][4]) {
    static_assert(sizeof(R) == 4, "one 32-bit register per element");
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(reinterpret_cast<float&>(regs[n][i]))::"memory");
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
// more than the tiles take). wgmma and the TMA apply their swizzle to absolute shared-memory addresses, in
// 1 KB atoms that must start 1 KB aligned; the tiles are whole multiples of 1 KB, so an aligned start is enough.
// __align__ on an extern array does not promise where a block's dynamic shared memory begins, so the
// kernel rounds it up itself.
__device__ unsigned char* aligned_smem(unsigned char* smem) {
    const unsigned address = __cvta_generic_to_shared(smem);
    return smem + (SMEM_ALIGN - address % SMEM_ALIGN) % SMEM_ALIGN;
}

// What the host's cuTensorMapEncodeTiled wrote (kernels/tma.py): the tensor's address, its four dimensions
// (HEAD_DIM, heads, seq_len, batch) and their strides, the box one copy moves (one 64-column plane of a
// tile: PLANE x 1 x rows x 1) and the 128-byte swizzle. Opaque to the kernel, which hands its address to
// the TMA; it arrives by value, as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// An mbarrier is a 64-bit counter in shared memory. A phase completes when its expected arrivals have
// arrived and the bytes announced with them have landed; waiters name the phase by its parity (0, 1, 0...).
__device__ void mbarrier_init(unsigned long long* barrier, int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(barrier)),
                 "r"(arrivals));
}

// Makes the barriers' initialisation visible to the copy engine before any copy counts bytes on them.
__device__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces how many bytes the copies completing on this barrier will bring.
__device__ void mbarrier_arrive_expect_bytes(unsigned long long* barrier, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     (unsigned)__cvta_generic_to_shared(barrier)),
                 "r"(bytes)
                 : "memory");
}

// One plain arrival: a consumer thread is done reading a stage.
__device__ void mbarrier_arrive(unsigned long long* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"((unsigned)__cvta_generic_to_shared(barrier))
                 : "memory");
}

// Wait until the phase of the given parity has completed. What its copies wrote is then visible to this
// thread and to the wgmmas it issues: the TMA writes through the async proxy that wgmma reads through, so
// no proxy fence is needed.
__device__ void mbarrier_wait(unsigned long long* barrier, int parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(parity)
                     : "memory");
    }
}

// As mbarrier_wait, but each try may sleep until the phase completes, for at most SLEEP_NS: for a thread whose
// waits are long and whose copies are asked for a tile before they are needed, the producer's.
constexpr int SLEEP_NS = 10000000;  // the hint, in nanoseconds
__device__ void mbarrier_wait_asleep(unsigned long long* barrier, int parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(parity), "n"(SLEEP_NS)
                     : "memory");
    }
}

// One plain arrival on the barrier at the same place in the shared memory of block `rank` of the cluster (mapa
// turns the address into that block's).
__device__ void mbarrier_arrive_remote(unsigned long long* barrier, int rank) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}"
                 ::"r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(rank)
                 : "memory");
}

// Stores value at the place of `to` in the shared memory of block `rank` of the cluster, its 4 bytes counted on
// the barrier at the place of `barrier` there, as a copy's bytes are.
__device__ void store_remote(int* to, int value, unsigned long long* barrier, int rank) {
    asm volatile("{\n.reg .b32 to, barrier;\nmapa.shared::cluster.u32 to, %0, %2;\n"
                 "mapa.shared::cluster.u32 barrier, %1, %2;\n"
                 "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [to], %3, [barrier];\n}"
                 ::"r"((unsigned)__cvta_generic_to_shared(to)), "r"((unsigned)__cvta_generic_to_shared(barrier)),
                 "r"(rank), "r"(value)
                 : "memory");
}

// What the other block of the cluster stored in `slot` with store_remote, once the barrier's phase of the given
// parity has completed; the wait acquires at the cluster's scope, where the store was made.
__device__ int receive(const int* slot, unsigned long long* barrier, int parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(parity)
                     : "memory");
    }
    return *slot;
}

// Whether the phase of the given parity has completed, asked once, without waiting.
__device__ bool mbarrier_test(unsigned long long* barrier, int parity) {
    unsigned done;
    asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(parity)
                 : "memory");
    return done;
}

// One TMA copy: the box at (col, head, row, batch) of the tensor into shared memory, its bytes counted on
// the barrier. Rows past the tensor's end (seq_len) are written as zeros.
__device__ void tma_load(void* smem_to, const TensorMap& map, int col, int head, int row, int batch,
                         unsigned long long* barrier) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];"
        ::"r"((unsigned)__cvta_generic_to_shared(smem_to)), "l"(&map), "r"(col), "r"(head), "r"(row), "r"(batch),
        "r"((unsigned)__cvta_generic_to_shared(barrier))
        : "memory");
}

// As tma_load, but the box lands at the same place in the shared memory of each block of the cluster named in
// `blocks` (bit r for rank r), its bytes counted on each one's barrier at the same place.
__device__ void tma_load_multicast(void* smem_to, const TensorMap& map, int col, int head, int row, int batch,
                                   unsigned long long* barrier, unsigned short blocks) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;"
        ::"r"((unsigned)__cvta_generic_to_shared(smem_to)), "l"(&map), "r"(col), "r"(head), "r"(row), "r"(batch),
        "r"((unsigned)__cvta_generic_to_shared(barrier)), "h"(blocks)
        : "memory");
}

// One TMA store: the box at (col, head, row, batch) of the tensor, from shared memory. Rows past the tensor's end
// (seq_len) are not written. The stores a thread issues join its bulk group when it commits them.
__device__ void tma_store(const TensorMap& map, const void* smem_from, int col, int head, int row, int batch) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];"
                 ::"l"(&map), "r"(col), "r"(head), "r"(row), "r"(batch),
                 "r"((unsigned)__cvta_generic_to_shared(smem_from))
                 : "memory");
}

// Close this thread's stores so far into one bulk group; wait until at most N of its groups are still reading
// shared memory (what they write to global memory may land later).
__device__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <int N>
__device__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Wait until all this thread's stores are done, their writes to global memory included.
__device__ void bulk_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Give registers back to the block's pool (dec) or take them from it (inc), per thread of the warpgroup.
// inc waits until the pool holds what it asks for.
template <int REGISTERS>
__device__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGISTERS));
}

template <int REGISTERS>
__device__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGISTERS));
}

// This block's rank in its cluster.
__device__ int cluster_rank() {
    unsigned rank;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

// A warp is done with a K or V stage. Paired, both blocks' copies fill it, so both blocks hear.
template <bool PAIRED>
__device__ void release(unsigned long long* free_barrier) {
    mbarrier_arrive(free_barrier);
    if (PAIRED) mbarrier_arrive_remote(free_barrier, cluster_rank() ^ 1);
}

// A barrier of every thread of the cluster's blocks, in two halves: arrive publishes what this thread wrote before
// it, and wait returns once every thread has arrived, with what they published visible.
__device__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

__device__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// A point ptxas schedules no instruction across: a fence of this thread's memory accesses at block scope.
__device__ void scheduling_fence() {
    asm volatile("fence.acq_rel.cta;" ::: "memory");
}

// Makes this thread's shared-memory writes visible to the async proxy, whose reads wgmma makes.
__device__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// A barrier of the `threads` threads (a multiple of 32) that name it; 0 is __syncthreads'.
// Counts this warp's threads at the barrier without waiting for it to complete.
__device__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Rows [row0, row0 + BLOCK_ROWS) of one head, one copy per 64-column plane (the map's box is PLANE columns
// of BLOCK_ROWS rows). Rows at or past seq_len arrive as zeros: a zero V row times a zero probability
// stays zero, never NaN.
template <int BLOCK_ROWS, typename T>
__device__ void load_tile(T* tile, const TensorMap& map, int head, int row0, int batch, unsigned long long* barrier) {
#pragma unroll
    for (int plane = 0; plane < HEAD_DIM / PLANE; ++plane) {
        tma_load(tile + plane * BLOCK_ROWS * PLANE, map, plane * PLANE, head, row0, batch, barrier);
    }
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
    // In a cluster, a shared address holds the block's rank above its offset: the 14-bit start field takes the
    // offset alone, or the rank would spill into the stride beside it.
    constexpr unsigned START_FIELD = (1 << 14) - 1;
    return (address >> 4 & START_FIELD) | (PLANE_BYTES >> 4) << 16 | (ATOM_BYTES >> 4) << 32 | SWIZZLE_128B << 62;
}

// The offset, in a descriptor's 16-byte units, from a tile's descriptor to the block at (row0, col0).
template <typename T>
__device__ constexpr unsigned long long descriptor_step(int row0, int col0) {
    return (col0 / PLANE * BLOCK_KV * PLANE + row0 * PLANE + col0 % PLANE) * sizeof(T) >> 4;
}

// A work item, decoded: the query tile's positions p0 ... of heads head0 ... head_end - 1, and its split's key tiles.
struct Work {
    bool finished, skipped;  // no tile left in the list; a split that has no key tile
    int p0, head0, head_end, kv_head, batch, n_tiles;  // positions p0 ..., heads head0 ... head_end - 1
    int split, first_tile, seq_len_k;  // key tiles first_tile ... of this split, of the sequence's seq_len_k
    int walk_tiles;  // the key tiles its block walks: its pair's (paired), of which it reads the first n_tiles
};
static_assert(sizeof(Work) == WORK_SLOT_BYTES, "a slot holds one Work");

// Where a thread's rows, g and g + 8 of its warp, fall in every query tile (row = position x tile_heads + head),
// made once: each division by tile_heads is a chain of dependent instructions, which would run between two tiles.
struct RowPlaces {
    int position[2], head[2];  // of rows g and g + 8: the position in the tile, the head in its group
    int positions;             // positions in a tile, BLOCK_Q / tile_heads
    bool whole_positions;      // tile_heads divides GROUP_Q: a warpgroup's rows are whole positions
};

// ---------------------------------------------------------------------------------------------------
// The kernel. Grid: one block of N_THREADS threads per SM, or per query tile if there are fewer (a block
// that finds no tile of its own has nothing to do).
// The consumers' work on a query tile is consume_query_tile, after the kernel.
// ---------------------------------------------------------------------------------------------------

template <typename T, bool CAUSAL, bool PAIRED>
__device__ __forceinline__ void consume_query_tile(T* q_smem, T* k_smem, T* v_smem,
                                                   unsigned long long* k_filled, unsigned long long* v_filled,
                                                   unsigned long long* k_free, unsigned long long* v_free,
                                                   int lane, int g, int t, int warp_row0, int group_row0,
                                                   int seq_len_q, int seq_len_k, int q_stride, float softmax_scale,
                                                   T* o_smem, T* o_batch, float* o_split, float* lse_rows,
                                                   const TensorMap& o_map, int batch,
                                                   int p0, int head0, int head_end, int tile_heads,
                                                   const RowPlaces& rows, int first_tile, int n_tiles, int kv_count,
                                                   unsigned long long* q_free, bool rows_past_end);

template <typename T, bool CAUSAL>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(N_THREADS, 1)
flash_attention(const __grid_constant__ TensorMap q_map, const __grid_constant__ TensorMap k_map,
                const __grid_constant__ TensorMap v_map, const __grid_constant__ TensorMap o_map,
                T* __restrict__ o, float* __restrict__ o_partial,
                float* __restrict__ lse, const int* __restrict__ seq_lens_k, int seq_len_q, int seq_len_k, int n_heads,
                int n_kv_heads, float softmax_scale, int batch_size, int n_splits, int* __restrict__ work_counter) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* q_buffers = reinterpret_cast<T*>(aligned_smem(smem));  // two tiles: this query tile's Q and the next one's
    T* k_smem = q_buffers + 2 * BLOCK_Q * HEAD_DIM;     // STAGES tiles
    T* v_smem = k_smem + STAGES * BLOCK_KV * HEAD_DIM;  // STAGES tiles
    T* o_smem = v_smem + STAGES * BLOCK_KV * HEAD_DIM;  // O on its way out
    // Per Q buffer: its tile has landed (filled), and every S that reads it is done (free).
    unsigned long long* q_filled = reinterpret_cast<unsigned long long*>(o_smem + BLOCK_Q * HEAD_DIM);
    unsigned long long* q_free = q_filled + 2;
    // Per stage: K's and V's tiles have landed (filled), and have been read (free). K and V have their own,
    // as a tile's K is read one product before its V.
    unsigned long long* k_filled = q_free + 2;
    unsigned long long* v_filled = k_filled + STAGES;
    unsigned long long* k_free = v_filled + STAGES;
    unsigned long long* v_free = k_free + STAGES;
    // Per Q buffer, paired: the number of its item, stored by the pair's first block in the second's
    // (pair_items), and the barrier its bytes land on (item_filled).
    unsigned long long* item_filled = v_free + STAGES;
    // Per Q buffer: the work item of the query tile it holds, decoded, written by the producer before its Q is
    // asked for.
    Work* work_slots = reinterpret_cast<Work*>(item_filled + 2);
    int* pair_items = reinterpret_cast<int*>(work_slots + 2);
    static_assert((Q_TILES * BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * sizeof(T) +
                      N_BARRIERS * sizeof(*q_filled) + 2 * WORK_SLOT_BYTES + 2 * ITEM_BYTES +
                      SMEM_ALIGN <= SMEM_BYTES,
                  "the carve-up above fits in SMEM_BYTES");

    // The shuffle tells the compiler what is true: warp is the same in every lane of a warp, so what is
    // computed from it (the descriptors of Q) can live in the warp's uniform registers that wgmma reads.
    const int warp = __shfl_sync(0xffffffff, threadIdx.x / 32, 0), lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int warp_row0 = warp * WARP_Q;  // this warp's first row inside the block's tiles
    const int group_row0 = warp / 4 * GROUP_Q;  // and its warpgroup's
    const int q_stride = n_heads * HEAD_DIM;  // from one row to the next
    // Causal is aligned bottom-right, as for queries against a KV cache: the queries are the last seq_len_q
    // of a sequence's keys, so query i sees keys 0 ... i + its length - seq_len_q (>= 0: the caller checks).

    // Grouped heads (GQA, or MQA with one K/V head): the n_heads / n_kv_heads query heads of a group, in a
    // row, share one K/V head. A tile holds tile_heads of them (the whole group when it fits) at tile_positions
    // query positions; a larger group takes head_chunks tiles side by side. kernels/launch.py makes the Q
    // map's box by the same rule.
    const int group = n_heads / n_kv_heads, tile_heads = min(group, BLOCK_Q);
    const int tile_positions = BLOCK_Q / tile_heads, head_chunks = (group + tile_heads - 1) / tile_heads;
    // Over long keys, the blocks of a cluster take neighbouring query tiles of one unit, which read the same key
    // tiles (causal, the later one at most one more), and share them (whole pairs of tiles, the keys not split).
    // Otherwise each block works alone.
    const int q_tiles = (seq_len_q + tile_positions - 1) / tile_positions;
    const bool paired = seq_len_k >= PAIRED_KEYS && q_tiles % CLUSTER == 0 && n_splits == 1;
    // The work: the items of the units (batch, K/V head, chunk of heads), units_at_once units at a time (fewer in
    // the last group), from the last to the first (causal, from the longest to the shortest): each unit's last
    // item, then each unit's item before it, ..., each item once per split, numbered split by split. An item is a
    // query tile, or paired, two neighbouring ones. Blocks (paired, pairs) take them one at a time in that order
    // from the counter.
    const int item_tiles = paired ? CLUSTER : 1, unit_items = q_tiles / item_tiles;
    const int units = head_chunks * n_kv_heads * batch_size, n_items = n_splits * unit_items * units;
    const int unit_kv_bytes = seq_len_k * 2 * HEAD_DIM * (int)sizeof(T);  // one unit's K and V
    // Full attention's tiles are all alike: nothing to balance, so one unit at a time.
    const int units_at_once = CAUSAL ? max(min(HEADS_AT_ONCE, KV_IN_L2_BYTES / unit_kv_bytes), 1) : 1;
    // The work of item `item` for the block that takes its tile `back` tiles before its last (paired, 0 or 1).
    const auto work_at = [&](int item, int back) {
        Work work;
        work.finished = item >= n_items;
        // Past the end, the last item stands in, so that every division below has a unit to count.
        const int whole = min(item, n_items - 1) / n_splits;  // the item's number, its splits counted as one
        const int unit0 = whole / (unit_items * units_at_once) * units_at_once;
        const int group_units = min(units_at_once, units - unit0), in_group = whole - unit0 * unit_items;
        const int unit = unit0 + in_group % group_units;
        const int last_p0 = (q_tiles - 1 - in_group / group_units * item_tiles) * tile_positions;
        work.p0 = last_p0 - back * tile_positions;
        work.kv_head = unit / head_chunks % n_kv_heads;
        work.batch = unit / head_chunks / n_kv_heads;
        work.head0 = work.kv_head * group + unit % head_chunks * tile_heads;
        work.head_end = min(work.head0 + tile_heads, (work.kv_head + 1) * group);
        work.seq_len_k = seq_lens_k == nullptr || work.finished ? seq_len_k : seq_lens_k[work.batch];
        // Causal: tiles wholly above the diagonal are skipped (the tile's last position sees up to key
        // p0 + tile_positions - 1 + seq_len_k - seq_len_q). At least one in all (length 0: output 0, lse -inf).
        const auto key_tiles = [&](int p0) {
            const int n_keys = CAUSAL ? min(work.seq_len_k, p0 + tile_positions + work.seq_len_k - seq_len_q)
                                      : work.seq_len_k;
            return max((n_keys + BLOCK_KV - 1) / BLOCK_KV, 1);
        };
        // A split's share: consecutive tiles, maybe none.
        const int all_tiles = key_tiles(work.p0), split_tiles = (all_tiles - 1) / n_splits + 1;
        work.split = item % n_splits;
        work.first_tile = work.split * split_tiles;
        work.n_tiles = min(split_tiles, all_tiles - work.first_tile);
        work.skipped = work.n_tiles <= 0;
        // Both blocks of a pair walk the key tiles of its last query tile, the most.
        work.walk_tiles = paired ? key_tiles(last_p0) : work.n_tiles;
        return work;
    };

    // Q stays in shared memory, where every tile's wgmma reads it. One thread sets up the barriers: a
    // filled one completes with the producer's arrival and the bytes of its copies, a free one with an
    // arrival of one lane in each consumer warp (of both blocks, paired; a Q buffer's, of every consumer lane: each
    // reads its work slot). The cluster barrier publishes them to both blocks before anyone waits on them, or copies
    // and arrives on them from the other block.
    constexpr int TILE_BYTES = BLOCK_KV * HEAD_DIM * sizeof(T);
    const int q_tile_bytes = tile_heads * tile_positions * HEAD_DIM * sizeof(T);  // the rows a Q box holds
    if (threadIdx.x == 0) {
        for (int buffer = 0; buffer < 2; ++buffer) {
            mbarrier_init(&q_filled[buffer], 1);
            mbarrier_init(&q_free[buffer], N_WARPS * 32);
            mbarrier_init(&item_filled[buffer], 1);
        }
        for (int stage = 0; stage < STAGES; ++stage) {
            mbarrier_init(&k_filled[stage], 1);
            mbarrier_init(&v_filled[stage], 1);
            mbarrier_init(&k_free[stage], paired ? CLUSTER * N_WARPS : N_WARPS);
            mbarrier_init(&v_free[stage], paired ? CLUSTER * N_WARPS : N_WARPS);
        }
        fence_barrier_init();
    }
    cluster_arrive();
    cluster_wait();

    // The producer: one thread asks for each query tile's Q as soon as its buffer is free, then for each of its
    // K and V tiles as soon as their stage is free. The stages go round across query tiles: kv_count counts
    // the K and V tiles of all the block's query tiles so far. Paired, it copies its plane of each K and V tile
    // into both blocks; both planes land on each block's filled barrier, which expects the whole tile. Its loop is
    // compiled once for pairs and once alone: one copy holding both does not fit in the producer's registers.
    const auto produce = [&](const bool pair) {
        const auto load_kv_tile = [&](T* tile, const TensorMap& map, int kv_head, int row0, int batch,
                                      unsigned long long* barrier) {
            if (pair) {
                tma_load_multicast(tile + cluster_rank() * BLOCK_KV * PLANE, map, cluster_rank() * PLANE, kv_head,
                                   row0, batch, barrier, (1 << CLUSTER) - 1);
            } else {
                load_tile<BLOCK_KV>(tile, map, kv_head, row0, batch, barrier);
            }
        };
        // The first thread of its second warp alone walks the work list, asking the counter for each item: warp 9,
        // on sub-partition 1 beside each consumer warpgroup's warp 1 (warp 8 is on warp 0's). Paired, the pair's
        // first block asks, and the second takes the item it hands over.
        for (int round = 0, kv_count = 0; threadIdx.x == (N_WARPS + 1) * 32;) {
            int item;
            if (pair && cluster_rank() == 1) {
                mbarrier_arrive_expect_bytes(&item_filled[round % 2], ITEM_BYTES);
                item = receive(&pair_items[round % 2], &item_filled[round % 2], round / 2 % 2);
            } else {
                // Every asker's last ask finds the list empty, so there are n_items + askers asks in all; the
                // last of them resets the counter for the next launch, when no block will ask again.
                item = atomicAdd(work_counter, 1);
                if (item == n_items + gridDim.x / item_tiles - 1) *work_counter = 0;
            }
            // Paired, the blocks take the item's last query tile in turns: causal, it has one key tile more.
            const Work work = work_at(item, pair ? (cluster_rank() + round) % 2 : 0);
            if (work.skipped && !work.finished) continue;
            const int kv_head = work.kv_head, batch = work.batch;
            // The Q buffers take turns; a buffer's barriers complete once per turn.
            const int buffer = round % 2, turn = round / 2;
            ++round;
            if (turn > 0) mbarrier_wait_asleep(&q_free[buffer], (turn - 1) % 2);
            // The first block hands the item over only now: the second took the one before in this slot before it
            // asked for its planes of that item's tiles, which this block's consumers, done with it, have had.
            if (pair && cluster_rank() == 0) store_remote(&pair_items[buffer], item, &item_filled[buffer], 1);
            work_slots[buffer] = work;  // the arrival below publishes it
            if (work.finished) {  // past the list's end, and no copy: the consumers stop there
                mbarrier_arrive(&q_filled[buffer]);
                break;
            }
            mbarrier_arrive_expect_bytes(&q_filled[buffer], q_tile_bytes);
            load_tile<BLOCK_Q>(q_buffers + buffer * BLOCK_Q * HEAD_DIM, q_map, work.head0, work.p0, batch,
                               &q_filled[buffer]);
            for (int tile = 0; tile < work.walk_tiles; ++tile, ++kv_count) {
                const int stage = kv_count % STAGES;
                // The consumers released tile - STAGES: a free barrier completes once per STAGES tiles.
                if (kv_count >= STAGES) mbarrier_wait_asleep(&k_free[stage], (kv_count / STAGES - 1) % 2);
                mbarrier_arrive_expect_bytes(&k_filled[stage], TILE_BYTES);
                const int row0 = (work.first_tile + tile) * BLOCK_KV;
                load_kv_tile(k_smem + stage * BLOCK_KV * HEAD_DIM, k_map, kv_head, row0, batch, &k_filled[stage]);
                if (kv_count >= STAGES) mbarrier_wait_asleep(&v_free[stage], (kv_count / STAGES - 1) % 2);
                mbarrier_arrive_expect_bytes(&v_filled[stage], TILE_BYTES);
                load_kv_tile(v_smem + stage * BLOCK_KV * HEAD_DIM, v_map, kv_head, row0, batch, &v_filled[stage]);
            }
        }
    };
    if (warp >= N_WARPS) {
        setmaxnreg_dec<PRODUCER_REGISTERS>();
        if (paired) {
            produce(true);
            cluster_arrive();  // the consumers' last barrier below counts every thread of the pair
        } else {
            produce(false);
        }
        return;
    }
    // The consumers: kernel 14's, once per query tile the producer hands over, until an empty slot.
    setmaxnreg_inc<CONSUMER_REGISTERS>();
    // Warpgroup 0 has the first turn on the tensor cores: it arrives once at its own turn barrier, in place of a
    // pass it has not had. At the end it takes the turn warpgroup 1 passed last, so both barriers end as they began.
    if (group_row0 == 0) named_barrier_arrive(TURN, N_WARPS * 32);
    RowPlaces rows;
    for (int h = 0; h < 2; ++h) {
        rows.position[h] = (warp_row0 + g + 8 * h) / tile_heads;
        rows.head[h] = (warp_row0 + g + 8 * h) % tile_heads;
    }
    rows.positions = tile_positions;
    rows.whole_positions = GROUP_Q % tile_heads == 0;
    // Paired and causal, the block on the earlier query tile may walk a key tile it does not read, the last of the
    // later tile's: it releases the tile's stages once its copies, the other block's among them, have landed.
    const auto pass_over = [&](int count) {
        const int stage = count % STAGES;
        mbarrier_wait(&k_filled[stage], count / STAGES % 2);
        if (lane == 0) release<true>(&k_free[stage]);
        mbarrier_wait(&v_filled[stage], count / STAGES % 2);
        if (lane == 0) release<true>(&v_free[stage]);
    };
    for (int round = 0, kv_count = 0;; ++round) {
        const int buffer = round % 2, turn = round / 2;
        mbarrier_wait(&q_filled[buffer], turn % 2);
        // Every lane reads the slot, and its own arrival frees the buffer for the producer's next write, so no
        // lane's read can race that write.
        const Work work = work_slots[buffer];
        if (work.finished) {
            if (group_row0 == 0) named_barrier_sync(TURN, N_WARPS * 32);
            if (threadIdx.x % (GROUP_Q * 2) == 0) bulk_wait_all();  // a store may not outlive the block's shared memory
            break;
        }
        T* o_batch = o + (long long)work.batch * seq_len_q * n_heads * HEAD_DIM;
        // Split, a work item writes fp32 rows and their log-sum-exp in its split's slices of o_partial and lse
        // (split, batch, ...), for combine_splits; whole, it writes o, and the log-sum-exp when lse is given.
        const long long split_batch = (long long)work.split * batch_size + work.batch;
        float* o_split = n_splits > 1 ? o_partial + split_batch * seq_len_q * n_heads * HEAD_DIM : nullptr;
        float* lse_rows = lse == nullptr ? nullptr : lse + split_batch * n_heads * seq_len_q;
        // The consumers' work in two copies, paired and alone, so that the loop of a block alone is kernel 30's.
#define CONSUME_QUERY_TILE(PAIRED)                                                                                  \
    consume_query_tile<T, CAUSAL, PAIRED>(                                                                          \
        q_buffers + buffer * BLOCK_Q * HEAD_DIM, k_smem, v_smem, k_filled, v_filled, k_free, v_free, lane, g, t,    \
        warp_row0, group_row0, seq_len_q, work.seq_len_k, q_stride, softmax_scale, o_smem, o_batch, o_split,       \
        lse_rows, o_map, work.batch, work.p0, work.head0, work.head_end, tile_heads, rows, work.first_tile,        \
        work.n_tiles, kv_count, &q_free[buffer], work.seq_len_k < seq_len_k)
        if (paired) {
            CONSUME_QUERY_TILE(true);
        } else {
            CONSUME_QUERY_TILE(false);
        }
#undef CONSUME_QUERY_TILE
        for (int tile = work.n_tiles; tile < work.walk_tiles; ++tile) pass_over(kv_count + tile);
        kv_count += work.walk_tiles;
    }
    // Paired, the other block's consumers may still arrive on this block's barriers: both leave together.
    if (paired) {
        cluster_arrive();
        cluster_wait();
    }
}

// The consumers' work on one query tile, positions p0 ... of heads head0 ... head_end - 1 (row = position x
// tile_heads + head): for each of its n_tiles K/V tiles from first_tile on
// tiles, as the producer fills their stage, S = Q K^T, the online softmax and O += P V; then O, normalised, out.
// Where this thread works in the tiles (lane, g, t, warp_row0, group_row0) is the kernel's, made once.
// Its K and V tiles are the block's kv_count-th and on, which sets their stages and barrier phases.
template <typename T, bool CAUSAL, bool PAIRED>
__device__ __forceinline__ void consume_query_tile(T* q_smem, T* k_smem, T* v_smem,
                                                   unsigned long long* k_filled, unsigned long long* v_filled,
                                                   unsigned long long* k_free, unsigned long long* v_free,
                                                   int lane, int g, int t, int warp_row0, int group_row0,
                                                   int seq_len_q, int seq_len_k, int q_stride, float softmax_scale,
                                                   T* o_smem, T* o_batch, float* o_split, float* lse_rows,
                                                   const TensorMap& o_map, int batch,
                                                   int p0, int head0, int head_end, int tile_heads,
                                                   const RowPlaces& rows, int first_tile, int n_tiles, int kv_count,
                                                   unsigned long long* q_free, bool rows_past_end) {
    const int causal_offset = seq_len_k - seq_len_q;  // query i sees keys 0 ... i + causal_offset
    // The positions of this thread's rows, g and g + 8 of its warp.
    const int row_position[2] = {p0 + rows.position[0], p0 + rows.position[1]};

    // Per thread: O rows g and g + 8 of this warp (index 2h + i is row g + 8h), and for those two rows
    // the running max (in base-2 units: times scale * log2(e)) and this thread's part of the running sum.
    const float scale_log2 = softmax_scale * 1.4426950408889634f;
    float o_acc[HEAD_DIM / MMA_N][4] = {};
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
    float row_sum[2] = {0.0f, 0.0f};

    // Descriptors of this warpgroup's Q rows and of stage 0's K and V, made once: another stage is a fixed
    // offset (STAGE_STEP), and so is a block inside a tile (descriptor_step).
    unsigned long long q_descriptor = smem_descriptor(q_smem, group_row0, 0);
    unsigned long long k_descriptor = smem_descriptor(k_smem, 0, 0);
    unsigned long long v_descriptor = smem_descriptor(v_smem, 0, 0);
    // Their constant upper halves are hidden from ptxas, which otherwise adds with carry into them, and Q's steps
    // stay in its lower half: a stage or a block is one 32-bit addition.
    asm volatile("" : "+l"(q_descriptor), "+l"(k_descriptor), "+l"(v_descriptor));
    constexpr unsigned long long STAGE_STEP = BLOCK_KV * HEAD_DIM * sizeof(T) >> 4;  // descriptors count 16-byte units
    // The tensor cores take one warpgroup's products at a time: each issue waits for this warpgroup's turn, and
    // hands the turn to the other warpgroup once its products are issued.
    const int group = group_row0 / GROUP_Q;
    const auto take_turn = [&]() { named_barrier_sync(TURN + group, N_WARPS * 32); };
    const auto pass_turn = [&]() { named_barrier_arrive(TURN + 1 - group, N_WARPS * 32); };

    float s_acc[BLOCK_KV / MMA_N][4];
    unsigned p_frag[BLOCK_KV / MMA_K][4];

    // S = Q K^T for this warpgroup's 64 rows x BLOCK_KV keys, one wgmma per 16 columns of HEAD_DIM.
    const auto issue_scores = [&](int stage) {
#pragma unroll
        for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
            const unsigned q_step = (unsigned)q_descriptor + (unsigned)descriptor_step<T>(0, mma_d * MMA_K);
            wgmma_smem_smem<T>(s_acc, q_descriptor >> 32 << 32 | q_step,
                               k_descriptor + stage * STAGE_STEP + descriptor_step<T>(0, mma_d * MMA_K), mma_d > 0);
        }
        wgmma_commit();
    };
    // O += P V, one wgmma per 16 keys.
    const auto issue_products = [&](int stage) {
#pragma unroll
        for (int mma_kv = 0; mma_kv < BLOCK_KV / MMA_K; ++mma_kv) {
            wgmma_regs_smem<T>(o_acc, p_frag[mma_kv],
                               v_descriptor + stage * STAGE_STEP + descriptor_step<T>(mma_kv * MMA_K, 0));
        }
        wgmma_commit();
    };
    // The scores of the tile at key kv0, first their row maxima: rescale[h] is what O must be multiplied by for
    // the new max, max_or_zero[h] what the exponentials subtract.
    const auto softmax_maxima = [&](int kv0, float (&rescale)[2], float (&max_or_zero)[2]) {
        // Keys past the end, and keys past the query's diagonal when causal, get no weight. The warp's first
        // position is lane 0's: dividing here would divide in every tile, as a division under a condition
        // cannot leave the loop.
        if (kv0 + BLOCK_KV > seq_len_k ||
            (CAUSAL && kv0 + BLOCK_KV - 1 > __shfl_sync(0xffffffff, row_position[0], 0) + causal_offset)) {
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; ++mma_n) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int key = kv0 + mma_n * MMA_N + 2 * t + i % 2;
                    if (key >= seq_len_k || (CAUSAL && key > row_position[i / 2] + causal_offset)) {
                        s_acc[mma_n][i] = -CUDART_INF_F;
                    }
                }
            }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // n-tile n joins chain n % CHAINS; the chains are then joined pairwise, in log2(CHAINS) steps.
            float chain_max[CHAINS];
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; ++mma_n) {
                const float pair_max = fmaxf(s_acc[mma_n][2 * h], s_acc[mma_n][2 * h + 1]);
                chain_max[mma_n % CHAINS] = mma_n < CHAINS ? pair_max : fmaxf(chain_max[mma_n % CHAINS], pair_max);
            }
#pragma unroll
            for (int width = CHAINS / 2; width > 0; width /= 2) {
#pragma unroll
                for (int c = 0; c < width; ++c) chain_max[c] = fmaxf(chain_max[c], chain_max[c + width]);
            }
            float tile_max = chain_max[0];
            // The 4 lanes t = 0..3 of a group hold one row between them.
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 2));
            const float new_max = fmaxf(row_max[h], tile_max * scale_log2);
            // A causal row may see no key of a split's first tiles: its max stays -inf, and 0 stands in for it
            // below, so that exp2 sees -inf (weight 0) instead of inf - inf.
            max_or_zero[h] = new_max == -CUDART_INF_F ? 0.0f : new_max;
            rescale[h] = fast_exp2(row_max[h] - max_or_zero[h]);
            row_max[h] = new_max;
            row_sum[h] *= rescale[h];
        }
    };
    // Then the unnormalised probabilities, in place, and this thread's part of each row's sum.
    const auto softmax_exponentials = [&](const float (&max_or_zero)[2]) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float chain_sum[CHAINS];
#pragma unroll
            for (int mma_n = 0; mma_n < BLOCK_KV / MMA_N; ++mma_n) {
#pragma unroll
                for (int i = 2 * h; i < 2 * h + 2; ++i) {
                    s_acc[mma_n][i] = fast_exp2(fmaf(s_acc[mma_n][i], scale_log2, -max_or_zero[h]));
                    const bool first = mma_n < CHAINS && i == 2 * h;  // a chain starts at its first term, not 0 + p
                    chain_sum[mma_n % CHAINS] = first ? s_acc[mma_n][i] : chain_sum[mma_n % CHAINS] + s_acc[mma_n][i];
                }
            }
#pragma unroll
            for (int width = CHAINS / 2; width > 0; width /= 2) {
#pragma unroll
                for (int c = 0; c < width; ++c) chain_sum[c] += chain_sum[c + width];
            }
            row_sum[h] += chain_sum[0];
        }
    };
    // P to 16 bits. The accumulators of n-tiles 2 mma_kv and 2 mma_kv + 1 are exactly the A fragment of
    // key block mma_kv, so P never leaves the registers.
    const auto to_p_frag = [&]() {
#pragma unroll
        for (int mma_kv = 0; mma_kv < BLOCK_KV / MMA_K; ++mma_kv) {
            p_frag[mma_kv][0] = pack_floats<T>(s_acc[2 * mma_kv][0], s_acc[2 * mma_kv][1]);
            p_frag[mma_kv][1] = pack_floats<T>(s_acc[2 * mma_kv][2], s_acc[2 * mma_kv][3]);
            p_frag[mma_kv][2] = pack_floats<T>(s_acc[2 * mma_kv + 1][0], s_acc[2 * mma_kv + 1][1]);
            p_frag[mma_kv][3] = pack_floats<T>(s_acc[2 * mma_kv + 1][2], s_acc[2 * mma_kv + 1][3]);
        }
    };

    // Tile 0: its scores alone.
    float rescale[2], max_or_zero[2];
    mbarrier_wait(&k_filled[kv_count % STAGES], kv_count / STAGES % 2);
    take_turn();
    wgmma_fence();
    issue_scores(kv_count % STAGES);
    pass_turn();
    wgmma_wait<0>();
    pin_registers(s_acc);
    if (lane == 0) release<PAIRED>(&k_free[kv_count % STAGES]);
    softmax_maxima(first_tile * BLOCK_KV, rescale, max_or_zero);
    softmax_exponentials(max_or_zero);
    to_p_frag();

    // Iteration `tile` issues S = Q K^T of this tile and, behind it, O += P V of the tile before. It waits
    // for S alone and runs the softmax while P V is on the tensor cores, then rescales O once P V is done.
    bool k_landed = false;  // whether this tile's K had landed when the tile before asked
    for (int tile = 1; tile < n_tiles; ++tile) {
        const unsigned count = kv_count + tile, stage = count % STAGES, last_stage = (count - 1) % STAGES;
        if (!k_landed) mbarrier_wait(&k_filled[stage], count / STAGES % 2);
        pin_registers(o_acc);
        pin_registers(p_frag);
        take_turn();
        wgmma_fence();
        issue_scores(stage);
        mbarrier_wait(&v_filled[last_stage], (count - 1) / STAGES % 2);  // V's wait runs under S's products
        issue_products(last_stage);
        pass_turn();

        wgmma_wait<1>();  // S has landed; P V may still be running
        pin_registers(s_acc);
        if (lane == 0) release<PAIRED>(&k_free[stage]);  // this warp is done with the K tile
        softmax_maxima((first_tile + tile) * BLOCK_KV, rescale, max_or_zero);
        scheduling_fence();  // the maxima stay above the wait below, under P V, and the exponentials below it

        wgmma_wait<0>();  // P V has landed: O may be rescaled, P and the V tile reused
        pin_registers(o_acc);
        pin_registers(p_frag);
        if (lane == 0) release<PAIRED>(&v_free[last_stage]);
        softmax_exponentials(max_or_zero);
        k_landed = mbarrier_test(&k_filled[(count + 1) % STAGES], (count + 1) / STAGES % 2);  // the next K, asked now
#pragma unroll
        for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
#pragma unroll
            for (int i = 0; i < 4; ++i) o_acc[mma_n][i] *= rescale[i / 2];
        }
        to_p_frag();
    }
    // Every S of this query tile is done, and every lane has read its work slot: its Q buffer may take the one
    // after next.
    mbarrier_arrive(q_free);

    // The last tile's P V.
    const int last_stage = (kv_count + n_tiles - 1) % STAGES;
    mbarrier_wait(&v_filled[last_stage], (kv_count + n_tiles - 1) / STAGES % 2);
    // A sequence shorter than the cache (rows_past_end): its keys past seq_len_k have P = 0, but the V rows
    // there hold whatever the cache held, and 0 x NaN is NaN. The consumers zero them before P V reads them.
    const int valid_rows = seq_len_k - (first_tile + n_tiles - 1) * BLOCK_KV, readers = N_WARPS * 32;
    if (rows_past_end && valid_rows < BLOCK_KV) {
        T* v_tile = v_smem + last_stage * BLOCK_KV * HEAD_DIM;
        const int zero_from = max(valid_rows, 0) * HEAD_DIM / CHUNK;  // the first 16-byte chunk past the end
        for (int chunk = zero_from + threadIdx.x; chunk < BLOCK_KV * HEAD_DIM / CHUNK; chunk += readers) {
            const int row = chunk / (HEAD_DIM / CHUNK), col = chunk % (HEAD_DIM / CHUNK) * CHUNK;
            *reinterpret_cast<uint4*>(&v_tile[smem_index(row, col)]) = make_uint4(0, 0, 0, 0);
        }
        fence_proxy_async();
        named_barrier_sync(V_ZEROED, readers);
    }
    pin_registers(o_acc);
    pin_registers(p_frag);
    take_turn();
    wgmma_fence();
    issue_products(last_stage);
    pass_turn();

    // O is normalised, converted to 16 bits and staged in o_smem, in the layout of a TMA box with 128-byte swizzle,
    // and the warpgroup's first thread stores it. The rows are one box when they are whole positions of whole
    // groups; otherwise each warp writes its own 16-byte vectors, as kernel 26. The staging rows are made free
    // while the last P V runs.
    const bool stored_by_tma = rows.whole_positions && o_split == nullptr;
    const bool store_issuer = threadIdx.x % (GROUP_Q * 2) == 0;  // the first thread of the warpgroup
    if (stored_by_tma) {
        // The store from the last query tile has read this warpgroup's rows before any lane overwrites them.
        if (store_issuer) bulk_wait_read<0>();
        named_barrier_sync(O_STAGED + group, GROUP_Q * 2);
    } else {
        __syncwarp();  // the warp's lanes are done reading what it staged last time
    }
    wgmma_wait<0>();
    pin_registers(o_acc);
    if (lane == 0) release<PAIRED>(&v_free[last_stage]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        row_sum[h] += __shfl_xor_sync(0xffffffff, row_sum[h], 1);
        row_sum[h] += __shfl_xor_sync(0xffffffff, row_sum[h], 2);
        // A row that saw no key of this split has sum 0: output 0, log-sum-exp -inf, weight 0 in combine_splits.
        const float inverse_sum = row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
        const int head = head0 + rows.head[h];
        const bool real = rows.position[h] < rows.positions && row_position[h] < seq_len_q && head < head_end;
        if (lse_rows != nullptr && t == 0 && real) {
            const float log2_sum = row_sum[h] > 0.0f ? row_max[h] + __log2f(row_sum[h]) : -CUDART_INF_F;
            lse_rows[(long long)head * seq_len_q + row_position[h]] = log2_sum * 0.6931471805599453f;  // ln 2
        }
        if (o_split != nullptr) {  // fp32 pairs straight to global memory: a decode tile has few real rows
            float* o_row = o_split + (long long)row_position[h] * q_stride + head * HEAD_DIM;
#pragma unroll
            for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
                const float2 pair = {o_acc[mma_n][2 * h] * inverse_sum, o_acc[mma_n][2 * h + 1] * inverse_sum};
                if (real) *reinterpret_cast<float2*>(&o_row[mma_n * MMA_N + 2 * t]) = pair;
            }
            continue;
        }
#pragma unroll
        for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
            const unsigned pair =
                pack_floats<T>(o_acc[mma_n][2 * h] * inverse_sum, o_acc[mma_n][2 * h + 1] * inverse_sum);
            *reinterpret_cast<unsigned*>(&o_smem[smem_index(warp_row0 + g + 8 * h, mma_n * MMA_N + 2 * t)]) = pair;
        }
    }
    if (o_split != nullptr) return;
    if (stored_by_tma) {
        // Every lane's writes, visible to the copy engine's reads (the async proxy), then one store per plane of
        // the warpgroup's GROUP_Q rows: positions p0 + group_row0 / tile_heads ... of heads head0 ... The map's box
        // is (PLANE, tile_heads, GROUP_Q / tile_heads); rows past seq_len_q are clipped by the TMA.
        fence_proxy_async();
        named_barrier_sync(O_STAGED + group, GROUP_Q * 2);
        if (store_issuer) {
#pragma unroll
            for (int plane = 0; plane < HEAD_DIM / PLANE; ++plane) {
                tma_store(o_map, o_smem + plane * BLOCK_Q * PLANE + group_row0 * PLANE, plane * PLANE, head0,
                          p0 + rows.position[0], batch);  // the issuer's row g = 0: the warpgroup's first
            }
            bulk_commit();
        }
        return;
    }
    __syncwarp();
    constexpr int CHUNKS_PER_ROW = HEAD_DIM / CHUNK;
#pragma unroll
    for (int step = 0; step < WARP_Q * CHUNKS_PER_ROW / 32; ++step) {
        const int chunk = step * 32 + lane;
        const int row = warp_row0 + chunk / CHUNKS_PER_ROW;
        const int col = chunk % CHUNKS_PER_ROW * CHUNK;
        // Rows past the tile's last position (when tile_heads does not divide BLOCK_Q) hold no query.
        const int position = p0 + row / tile_heads, head = head0 + row % tile_heads;
        if (row / tile_heads < BLOCK_Q / tile_heads && position < seq_len_q && head < head_end) {
            *reinterpret_cast<uint4*>(&o_batch[(long long)position * q_stride + head * HEAD_DIM + col]) =
                *reinterpret_cast<const uint4*>(&o_smem[smem_index(row, col)]);
        }
    }
}

// The split outputs of each row, merged: split s, normalised by its own sum, weighs exp(lse_s - lse_max) of the
// total (its share of the softmax's denominator). One warp per row of o, 4 columns per lane; rows numbered as
// o's, (batch x seq_len_q + position) x n_heads + head. A split's o_partial is (batch, seq_len_q, n_heads,
// HEAD_DIM) and its lse (batch, n_heads, seq_len_q), as is the log-sum-exp written when lse is given.
template <typename T>
__global__ void combine_splits(const float* __restrict__ o_partial, const float* __restrict__ lse_partial,
                               T* __restrict__ o, float* __restrict__ lse, int n_rows, int seq_len_q, int n_heads,
                               int n_splits) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= n_rows) return;
    const int head = row % n_heads, position = row / n_heads % seq_len_q, batch = row / n_heads / seq_len_q;
    const long long lse_row = ((long long)batch * n_heads + head) * seq_len_q + position;
    float lse_max = -CUDART_INF_F;
    for (int split = 0; split < n_splits; ++split) {
        lse_max = fmaxf(lse_max, lse_partial[split * (long long)n_rows + lse_row]);
    }
    // A split a row saw nothing of (-inf, its output never written when the split had no tile) is passed over.
    float4 sum = {0.0f, 0.0f, 0.0f, 0.0f};
    float total = 0.0f;
    for (int split = 0; split < n_splits; ++split) {
        const float split_lse = lse_partial[split * (long long)n_rows + lse_row];
        if (split_lse == -CUDART_INF_F) continue;
        const float weight = expf(split_lse - lse_max);
        const float* split_row = o_partial + (split * (long long)n_rows + row) * HEAD_DIM;
        const float4 part = reinterpret_cast<const float4*>(split_row)[lane];
        total += weight;
        sum.x += weight * part.x, sum.y += weight * part.y, sum.z += weight * part.z, sum.w += weight * part.w;
    }
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;  // a row that saw no key: output 0, lse -inf
    const uint2 pairs = {pack_floats<T>(sum.x * inverse, sum.y * inverse),
                         pack_floats<T>(sum.z * inverse, sum.w * inverse)};
    reinterpret_cast<uint2*>(o + (long long)row * HEAD_DIM)[lane] = pairs;
    if (lse != nullptr && lane == 0) lse[lse_row] = total > 0.0f ? lse_max + logf(total) : -CUDART_INF_F;
}

// ---------------------------------------------------------------------------------------------------
// The decode kernel: a call whose query tiles hold at most DECODE_ROWS rows (a position or a few, times the
// group of query heads that share a K/V head) reads far more than it computes. It gets small blocks, several
// to an SM, each copying its own K and V with cp.async from every thread, and mma.sync tiles of 16 rows, so
// that the padding costs a quarter of what a 64-row wgmma tile's does. The four warps of a block split each
// key tile between them, each with its own online softmax, and merge their rows at the end.
// ---------------------------------------------------------------------------------------------------

// Decode tiles are plain row-major (key, HEAD_DIM) tiles of 256-byte rows, as chapters 4-8 keep them: chunk c
// of row r at chunk c ^ (r % 8), which ldmatrix reads without bank conflicts.
__device__ int row_index(int row, int col) {
    return row * HEAD_DIM + ((col / CHUNK) ^ (row % 8)) * CHUNK + col % CHUNK;
}

// One mma.sync.m16n8k16 with fp32 accumulation: d += a b.
template <typename T>
__device__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);

template <>
__device__ void mma_m16n8k16<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ void mma_m16n8k16<__half>(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

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

// This lane's address in the (16, 16) block at (row0, col0) of a decode tile, row0 a multiple of 8 and col0 of
// 16: lane l points at row l % 16, column (l / 16) x 8, so the four matrices are top-left, bottom-left,
// top-right, bottom-right. col0 only XORs chunk bits, and row0 adds whole rows.
template <typename T>
__device__ unsigned block_address(const T* tile, int row0, int col0) {
    const int lane = threadIdx.x % 32;
    const unsigned lane_address = __cvta_generic_to_shared(&tile[row_index(lane % 16, lane / 16 * CHUNK)]);
    return (lane_address ^ (col0 * sizeof(T))) + row0 * HEAD_DIM * sizeof(T);
}

// An A operand, the (16, 16) block at (row0, col0): its four matrices are the four A registers in order.
template <typename T>
__device__ void load_a_frag(unsigned (&frag)[4], const T* tile, int row0, int col0) {
    ldmatrix_x4(frag[0], frag[1], frag[2], frag[3], block_address(tile, row0, col0));
}

// B operands of two n-tiles from a (16, 16) block stored (n, k), as K is (key, dim): frag[j] is rows
// row0 + 8j ... + 7, so n-tile 0 is (top-left, top-right) and n-tile 1 (bottom-left, bottom-right).
template <typename T>
__device__ void load_b_frags(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    ldmatrix_x4(frag[0][0], frag[1][0], frag[0][1], frag[1][1], block_address(tile, row0, col0));
}

// The same from a block stored (k, n), as V is (key, dim): .trans turns each matrix, and n-tile 0 is
// (top-left, bottom-left), n-tile 1 (top-right, bottom-right).
template <typename T>
__device__ void load_b_frags_transposed(unsigned (&frag)[2][2], const T* tile, int row0, int col0) {
    ldmatrix_x4_trans(frag[0][0], frag[0][1], frag[1][0], frag[1][1], block_address(tile, row0, col0));
}

// cp.async's group bookkeeping: close the copies issued so far into one group; wait until at most N of this
// thread's groups are still in flight (other threads' copies are visible only after a barrier as well).
__device__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;");
}

template <int N>
__device__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// One 16-byte cp.async into a decode tile: src_bytes of them read (16, or 0 for a row past the end, which
// then arrives as zeros: a zero V row times a zero probability stays zero, never NaN).
__device__ void cp_async_16(void* smem_to, const void* from, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((unsigned)__cvta_generic_to_shared(smem_to)),
                 "l"(from), "r"(src_bytes)
                 : "memory");
}

// Rows [row0, row0 + DECODE_KV) of one K/V head, every thread of the block copying: 16 threads to a 256-byte
// row, each thread one column of 16-byte chunks, ROWS_PER_STEP rows apart. Its swizzled chunk is then the same
// in every row it copies, so its addresses are worked out once and only the row moves. A whole tile copies
// without checks; in the last, a row at or past n_keys (the sequence's length) reads nothing and arrives as zeros.
template <typename T>
__device__ void load_decode_tile(T* tile, const T* head, int row0, int n_keys, int row_stride) {
    constexpr int CHUNKS_PER_ROW = HEAD_DIM / CHUNK, ROWS_PER_STEP = DECODE_THREADS / CHUNKS_PER_ROW;
    static_assert(DECODE_KV % ROWS_PER_STEP == 0 && ROWS_PER_STEP % 8 == 0,
                  "whole steps, each keeping a thread's row % 8 and so its chunk");
    const int row = threadIdx.x / CHUNKS_PER_ROW, col = threadIdx.x % CHUNKS_PER_ROW * CHUNK;
    T* to = &tile[row_index(row, col)];
    const T* from = head + (long long)(row0 + row) * row_stride + col;
    const long long step_stride = (long long)ROWS_PER_STEP * row_stride;
    if (row0 + DECODE_KV <= n_keys) {  // the same for the whole block, so no thread waits on another's branch
#pragma unroll
        for (int step = 0; step < DECODE_KV / ROWS_PER_STEP; ++step) {
            cp_async_16(to + step * ROWS_PER_STEP * HEAD_DIM, from + step * step_stride, 16);
        }
    } else {
#pragma unroll
        for (int step = 0; step < DECODE_KV / ROWS_PER_STEP; ++step) {
            const bool inside = row0 + row + step * ROWS_PER_STEP < n_keys;
            cp_async_16(to + step * ROWS_PER_STEP * HEAD_DIM, inside ? from + step * step_stride : head,
                        inside ? 16 : 0);
        }
    }
}

// Grid: (n_splits, n_kv_heads, batch). Block (split, kv_head, batch) takes the query rows of one K/V group,
// row = position x group + head (packed as in chapter 17), against its split's key tiles; the host launches it
// when seq_len_q x group <= DECODE_ROWS. Split, it writes fp32 rows and their log-sum-exp into o_partial and
// lse for combine_splits, as the main kernel's splits do; whole, o, and the log-sum-exp when lse is given.
template <typename T, bool CAUSAL>
__global__ void __launch_bounds__(DECODE_THREADS, DECODE_BLOCKS_PER_SM)
decode_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                 float* __restrict__ o_partial, float* __restrict__ lse, const int* __restrict__ seq_lens_k,
                 int seq_len_q, int seq_len_k, int n_heads, int n_kv_heads, float softmax_scale, int n_splits) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* q_smem = reinterpret_cast<T*>(aligned_smem(smem));
    T* k_smem = q_smem + DECODE_ROWS * HEAD_DIM;             // DECODE_STAGES tiles
    T* v_smem = k_smem + DECODE_STAGES * DECODE_KV * HEAD_DIM;  // DECODE_STAGES tiles
    static_assert((DECODE_ROWS + 2 * DECODE_STAGES * DECODE_KV) * HEAD_DIM * sizeof(T) + SMEM_ALIGN <=
                      DECODE_SMEM_BYTES,
                  "the carve-up above fits in DECODE_SMEM_BYTES");

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int split = blockIdx.x, kv_head = blockIdx.y, batch = blockIdx.z, batch_size = gridDim.z;
    const int group = n_heads / n_kv_heads, rows = seq_len_q * group;
    const int q_stride = n_heads * HEAD_DIM, kv_stride = n_kv_heads * HEAD_DIM;  // from one row to the next
    const T* k_head = k + ((long long)batch * seq_len_k * n_kv_heads + kv_head) * HEAD_DIM;
    const T* v_head = v + ((long long)batch * seq_len_k * n_kv_heads + kv_head) * HEAD_DIM;
    // The sequence's keys; causal, bottom-right: position p sees keys 0 ... p + causal_offset, so the last
    // position sees them all and no tile is skipped.
    const int n_keys = seq_lens_k == nullptr ? seq_len_k : seq_lens_k[batch];
    const int causal_offset = n_keys - seq_len_q;
    // This split's share: consecutive tiles, maybe none (its rows then say so: output 0, lse -inf).
    const int all_tiles = (n_keys + DECODE_KV - 1) / DECODE_KV, split_tiles = (all_tiles + n_splits - 1) / n_splits;
    const int first_tile = split * split_tiles, n_tiles = max(min(split_tiles, all_tiles - first_tile), 0);

    // Q: row r is position r / group of head kv_head x group + r % group; rows past `rows` arrive as zeros.
    constexpr int CHUNKS_PER_ROW = HEAD_DIM / CHUNK;
#pragma unroll
    for (int chunk = threadIdx.x; chunk < DECODE_ROWS * CHUNKS_PER_ROW; chunk += DECODE_THREADS) {
        const int row = chunk / CHUNKS_PER_ROW, col = chunk % CHUNKS_PER_ROW * CHUNK;
        const int position = row / group, head = kv_head * group + row % group;
        const bool inside = row < rows;
        const long long from = ((long long)batch * seq_len_q + (inside ? position : 0)) * q_stride +
                               (inside ? head : 0) * HEAD_DIM + col;
        cp_async_16(&q_smem[row_index(row, col)], &q[from], inside ? 16 : 0);
    }
    // The ring: tile i in stage i % DECODE_STAGES, each tile one group (Q joins tile 0's).
#pragma unroll
    for (int tile = 0; tile < DECODE_STAGES - 1; ++tile) {
        if (tile < n_tiles) {
            const int row0 = (first_tile + tile) * DECODE_KV;
            load_decode_tile(k_smem + tile * DECODE_KV * HEAD_DIM, k_head, row0, n_keys, kv_stride);
            load_decode_tile(v_smem + tile * DECODE_KV * HEAD_DIM, v_head, row0, n_keys, kv_stride);
        }
        cp_async_commit();
    }
    cp_async_wait<DECODE_STAGES - 2>();  // Q (and tile 0) have landed
    __syncthreads();
    unsigned q_frag[HEAD_DIM / MMA_K][4];
#pragma unroll
    for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) load_a_frag(q_frag[mma_d], q_smem, 0, mma_d * MMA_K);

    // Per thread, as in every chapter: O rows g and g + 8 of the tile, their running max in base-2 units and
    // this thread's part of their sums, over the keys this warp takes: WARP_KEYS of every tile.
    constexpr int WARP_KEYS = DECODE_KV / DECODE_WARPS;
    static_assert(WARP_KEYS == MMA_K, "a warp's keys are one k-step of P V");
    const float scale_log2 = softmax_scale * 1.4426950408889634f;
    float o_acc[HEAD_DIM / MMA_N][4] = {};
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
    float row_sum[2] = {0.0f, 0.0f};
    const int row_position[2] = {g / group, (g + 8) / group};

    for (int tile = 0; tile < n_tiles; ++tile) {
        cp_async_wait<DECODE_STAGES - 2>();  // this tile's K and V have landed, for this thread's copies
        // Publishes every thread's copies, and tells that every warp is done with tile - 1, whose stage the
        // copies below refill.
        __syncthreads();
        const int next = tile + DECODE_STAGES - 1;
        if (next < n_tiles) {
            const int row0 = (first_tile + next) * DECODE_KV, stage = next % DECODE_STAGES;
            load_decode_tile(k_smem + stage * DECODE_KV * HEAD_DIM, k_head, row0, n_keys, kv_stride);
            load_decode_tile(v_smem + stage * DECODE_KV * HEAD_DIM, v_head, row0, n_keys, kv_stride);
        }
        cp_async_commit();  // maybe empty: the wait above counts groups
        const T* k_tile = k_smem + tile % DECODE_STAGES * DECODE_KV * HEAD_DIM;
        const T* v_tile = v_smem + tile % DECODE_STAGES * DECODE_KV * HEAD_DIM;
        const int key0 = (first_tile + tile) * DECODE_KV + warp * WARP_KEYS;  // this warp's first key

        // S = Q K^T for the 16 rows x this warp's 16 keys: two n-tiles.
        float s_acc[2][4] = {};
#pragma unroll
        for (int mma_d = 0; mma_d < HEAD_DIM / MMA_K; ++mma_d) {
            unsigned k_frag[2][2];
            load_b_frags(k_frag, k_tile, warp * WARP_KEYS, mma_d * MMA_K);
            mma_m16n8k16<T>(s_acc[0], q_frag[mma_d], k_frag[0]);
            mma_m16n8k16<T>(s_acc[1], q_frag[mma_d], k_frag[1]);
        }
        // Keys past the sequence's end, and past a position's diagonal when causal, get no weight.
        if (key0 + WARP_KEYS > n_keys || CAUSAL) {
#pragma unroll
            for (int n = 0; n < 2; ++n) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int key = key0 + n * MMA_N + 2 * t + i % 2;
                    if (key >= n_keys || (CAUSAL && key > row_position[i / 2] + causal_offset)) {
                        s_acc[n][i] = -CUDART_INF_F;
                    }
                }
            }
        }
        // Online softmax over the warp's keys. A warp may see no key of a row in a tile, or in all its tiles so
        // far: its max is then -inf, and 0 stands in for it, so that exp2 never sees -inf - (-inf).
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float tile_max = fmaxf(fmaxf(s_acc[0][2 * h], s_acc[0][2 * h + 1]), fmaxf(s_acc[1][2 * h], s_acc[1][2 * h + 1]));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 2));
            const float new_max = fmaxf(row_max[h], tile_max * scale_log2);
            const float max_or_zero = new_max == -CUDART_INF_F ? 0.0f : new_max;
            const float rescale = fast_exp2(row_max[h] - max_or_zero);
            row_max[h] = new_max;
            row_sum[h] *= rescale;
#pragma unroll
            for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
                o_acc[mma_n][2 * h] *= rescale;
                o_acc[mma_n][2 * h + 1] *= rescale;
            }
#pragma unroll
            for (int n = 0; n < 2; ++n) {
#pragma unroll
                for (int i = 2 * h; i < 2 * h + 2; ++i) {
                    s_acc[n][i] = fast_exp2(fmaf(s_acc[n][i], scale_log2, -max_or_zero));
                    row_sum[h] += s_acc[n][i];
                }
            }
        }
        // P, 16 rows x the warp's 16 keys, is one A fragment; O += P V over the warp's keys.
        const unsigned p_frag[4] = {pack_floats<T>(s_acc[0][0], s_acc[0][1]), pack_floats<T>(s_acc[0][2], s_acc[0][3]),
                                    pack_floats<T>(s_acc[1][0], s_acc[1][1]), pack_floats<T>(s_acc[1][2], s_acc[1][3])};
#pragma unroll
        for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; mma_n += 2) {
            unsigned v_frag[2][2];
            load_b_frags_transposed(v_frag, v_tile, warp * WARP_KEYS, mma_n * MMA_N);
            mma_m16n8k16<T>(o_acc[mma_n], p_frag, v_frag[0]);
            mma_m16n8k16<T>(o_acc[mma_n + 1], p_frag, v_frag[1]);
        }
    }

    // The warps merge their rows through shared memory, where the stages were: each warp's max and sum per row,
    // then its O rows in fp32. Row r's output is sum_w 2^(max_w - max) O_w / sum_w 2^(max_w - max) sum_w.
    // O rows lie MERGE_STRIDE floats apart: 8 more than a row shifts the next by 8 banks, so that the rows a warp
    // writes together fall on different banks.
    cp_async_wait<0>();  // only empty groups can be left, but no copy may land on what is written below
    __syncthreads();
    constexpr int MERGE_STRIDE = HEAD_DIM + 8;
    float* warp_max = reinterpret_cast<float*>(k_smem);       // (DECODE_WARPS, DECODE_ROWS)
    float* warp_sum = warp_max + DECODE_WARPS * DECODE_ROWS;  // (DECODE_WARPS, DECODE_ROWS)
    float* warp_o = warp_sum + DECODE_WARPS * DECODE_ROWS;    // (DECODE_WARPS, DECODE_ROWS, MERGE_STRIDE)
    static_assert((2 + MERGE_STRIDE) * DECODE_WARPS * DECODE_ROWS * sizeof(float) <=
                      2 * DECODE_STAGES * DECODE_KV * HEAD_DIM * sizeof(T),
                  "the merge fits where the stages were");
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        row_sum[h] += __shfl_xor_sync(0xffffffff, row_sum[h], 1);
        row_sum[h] += __shfl_xor_sync(0xffffffff, row_sum[h], 2);
        const int row = g + 8 * h;
        if (t == 0) {
            warp_max[warp * DECODE_ROWS + row] = row_max[h];
            warp_sum[warp * DECODE_ROWS + row] = row_sum[h];
        }
#pragma unroll
        for (int mma_n = 0; mma_n < HEAD_DIM / MMA_N; ++mma_n) {
            *reinterpret_cast<float2*>(&warp_o[(warp * DECODE_ROWS + row) * MERGE_STRIDE + mma_n * MMA_N + 2 * t]) =
                make_float2(o_acc[mma_n][2 * h], o_acc[mma_n][2 * h + 1]);
        }
    }
    __syncthreads();
    // DECODE_THREADS / DECODE_ROWS threads to a row. A thread takes VECTOR columns in every run of
    // ROW_THREADS x VECTOR, so that the row's threads read one run together: all 32 banks, once each.
    constexpr int ROW_THREADS = DECODE_THREADS / DECODE_ROWS, VECTOR = 4, RUN = ROW_THREADS * VECTOR;
    static_assert(RUN == 32 && HEAD_DIM % RUN == 0, "a row's threads read 32 floats, one to a bank, at a time");
    const int row = threadIdx.x / ROW_THREADS, col0 = threadIdx.x % ROW_THREADS * VECTOR;
    if (row >= rows) return;
    float block_max = -CUDART_INF_F;
#pragma unroll
    for (int w = 0; w < DECODE_WARPS; ++w) block_max = fmaxf(block_max, warp_max[w * DECODE_ROWS + row]);
    float weight[DECODE_WARPS], total = 0.0f;
#pragma unroll
    for (int w = 0; w < DECODE_WARPS; ++w) {
        const float warp_row_max = warp_max[w * DECODE_ROWS + row];
        weight[w] = warp_row_max == -CUDART_INF_F ? 0.0f : fast_exp2(warp_row_max - block_max);
        total += weight[w] * warp_sum[w * DECODE_ROWS + row];
    }
    // A row that saw no key of this split: output 0, log-sum-exp -inf, weight 0 in combine_splits.
    const float inverse_total = total > 0.0f ? 1.0f / total : 0.0f;
    const int position = row / group, head = kv_head * group + row % group;
    const long long split_batch = (long long)split * batch_size + batch;
    const long long out_row = ((n_splits > 1 ? split_batch : batch) * seq_len_q + position) * n_heads + head;
#pragma unroll
    for (int col = col0; col < HEAD_DIM; col += RUN) {
        float4 sum = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int w = 0; w < DECODE_WARPS; ++w) {
            const float4 part = *reinterpret_cast<const float4*>(&warp_o[(w * DECODE_ROWS + row) * MERGE_STRIDE + col]);
            sum.x += weight[w] * part.x;
            sum.y += weight[w] * part.y;
            sum.z += weight[w] * part.z;
            sum.w += weight[w] * part.w;
        }
        const float4 out = {sum.x * inverse_total, sum.y * inverse_total, sum.z * inverse_total, sum.w * inverse_total};
        if (n_splits > 1) {
            *reinterpret_cast<float4*>(&o_partial[out_row * HEAD_DIM + col]) = out;
        } else {
            *reinterpret_cast<uint2*>(&o[out_row * HEAD_DIM + col]) = {pack_floats<T>(out.x, out.y),
                                                                        pack_floats<T>(out.z, out.w)};
        }
    }
    if (lse != nullptr && threadIdx.x % ROW_THREADS == 0) {
        const long long lse_row = ((n_splits > 1 ? split_batch : batch) * n_heads + head) * seq_len_q + position;
        lse[lse_row] = total > 0.0f ? (block_max + __log2f(total)) * 0.6931471805599453f : -CUDART_INF_F;
    }
}
