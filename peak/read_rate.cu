// How fast one GPU reads a decode KV cache: K and V of (batch, kv_len, kv_heads, HEAD_DIM) 16-bit values,
// contiguous, each byte read once, by five copy mechanisms (`runner.py read_rate` times them).
//
// A decoding call does a few FLOPs per byte of K and V, so its speed is how fast its copies read them. Chapter 19
// copies tiles of BLOCK_KV rows of one head into shared memory by the TMA, one box per 64-column plane, STAGES tiles
// ahead of consumer warps that wait on each stage's barrier. The first four readers keep that block and drop the
// attention: their consumers only wait for each stage and free it. tma_read copies as chapter 19 does (PLANES = 2)
// or with one box per 256-byte row (PLANES = 1: does splitting a row into two planes cost?); cp_async_read has the
// 128 threads of the producer warpgroup copy with cp.async instead, each block taking one contiguous chunk of the
// tile list or items of ITEM_TILES tiles dealt round. The fifth, load_read, is plain 16-byte loads by every thread
// with nothing in shared memory: the read ceiling.
//
// Under CHECKSUM the consumers XOR together every 32-bit word of each tile they receive and atomicXor the result
// into *xor_out. XOR does not depend on the order of the words, so the swizzle does not matter: the host compares
// it with the XOR of every word of K and V. load_read always does, as its loads would be dead otherwise; the timed
// instances of the other four leave it out.

constexpr int HEAD_DIM = 128;
constexpr int ELEMENT_BYTES = 2;  // one bf16 or fp16 value: the readers move bytes, whatever they hold
constexpr int ROW_BYTES = HEAD_DIM * ELEMENT_BYTES;  // 256: one row of one head
constexpr int BLOCK_KV = 128;                        // rows per tile: chapter 19's K/V tile
constexpr int TILE_BYTES = BLOCK_KV * ROW_BYTES;     // 32 KB of K, or of V
constexpr int STAGES = 2;                            // shared-memory buffers, each for one tile of K and one of V
constexpr int N_WARPS = 8;                           // the consumers: two warpgroups, as in chapter 19
constexpr int PRODUCER_WARPS = 4;                    // and one warpgroup that copies
constexpr int N_THREADS = (N_WARPS + PRODUCER_WARPS) * 32;
constexpr int CONSUMER_THREADS = N_WARPS * 32;
constexpr int PRODUCER_THREADS = PRODUCER_WARPS * 32;
constexpr int PLANE_BYTES = 128;  // one row of a 64-column plane: the span of the 128-byte swizzle
constexpr int CHUNK_BYTES = 16;   // one cp.async, one vector load
constexpr int ROW_CHUNKS = ROW_BYTES / CHUNK_BYTES;    // 16
constexpr int PLANE_CHUNKS = PLANE_BYTES / CHUNK_BYTES;  // 8
constexpr int SMEM_ALIGN = 1024;  // the 128-byte swizzle works in 1 KB atoms, which must start 1 KB aligned
constexpr int MBARRIER_BYTES = 8;
// Dynamic shared memory of readers 1-4: the tiles of K and V, a filled and a free barrier per stage, and the
// slack aligned_smem may skip.
constexpr int SMEM_BYTES = 2 * STAGES * TILE_BYTES + 2 * STAGES * MBARRIER_BYTES + SMEM_ALIGN;
constexpr int CONTIGUOUS = 0;  // cp_async_read's ITEM_TILES for one contiguous chunk of the tile list per block
constexpr int ITEM_TILES = 4;  // and for items of 4 tiles dealt round
// load_read: blocks of LOAD_THREADS, LOAD_BLOCKS_PER_SM of them on each SM (every thread slot the SM has); each
// thread has LOAD_UNROLL vectors of K and as many of V in flight: 128 KB per SM, well over the bytes in flight
// DRAM's bandwidth times its latency asks of one SM, in the 32 registers a thread may use at that occupancy.
constexpr int LOAD_THREADS = 256;
constexpr int LOAD_BLOCKS_PER_SM = 8;
constexpr int LOAD_UNROLL = 2;
static_assert(SMEM_BYTES <= 227 * 1024, "SMEM_BYTES fits in one block's shared memory on Hopper");
static_assert(PRODUCER_THREADS % ROW_CHUNKS == 0 && PRODUCER_THREADS / ROW_CHUNKS % 8 == 0,
              "a pass of the producer's threads covers whole rows, a multiple of the swizzle's 8");

// ---------------------------------------------------------------------------------------------------
// The few PTX wrappers: chapter 19's, as it writes them.
// ---------------------------------------------------------------------------------------------------

// What the host's cuTensorMapEncodeTiled wrote: the tensor, the box one copy moves, the swizzle. Opaque here.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// An mbarrier: a phase completes when its expected arrivals have arrived and the bytes announced with them
// have landed; waiters name the phase by its parity (0, 1, 0, ...).
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

// One plain arrival: a consumer warp is done with a stage.
__device__ void mbarrier_arrive(unsigned long long* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"((unsigned)__cvta_generic_to_shared(barrier))
                 : "memory");
}

// Wait until the phase of the given parity has completed; what its copies wrote is then visible to this thread.
__device__ void mbarrier_wait(unsigned long long* barrier, int parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(parity)
                     : "memory");
    }
}

// One TMA copy: the box at (col, head, row, batch) of the tensor into shared memory, its bytes counted on the barrier.
__device__ void tma_load(void* smem_to, const TensorMap& map, int col, int head, int row, int batch,
                         unsigned long long* barrier) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];"
        ::"r"((unsigned)__cvta_generic_to_shared(smem_to)), "l"(&map), "r"(col), "r"(head), "r"(row), "r"(batch),
        "r"((unsigned)__cvta_generic_to_shared(barrier))
        : "memory");
}

// One 16-byte cp.async, around L1 (.cg): the bytes go from L2 to shared memory.
__device__ void cp_async_16(unsigned smem_to, const void* from) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_to), "l"(from) : "memory");
}

// The barrier counts one arrival from this thread once all its cp.async so far have landed (noinc: the arrival
// is one of those the barrier was initialised to expect).
__device__ void cp_async_arrive(unsigned long long* barrier) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"((unsigned)__cvta_generic_to_shared(
                     barrier))
                 : "memory");
}

// The dynamic shared memory, its start rounded up to SMEM_ALIGN bytes: __align__ on an extern array does not
// promise where a block's dynamic shared memory begins.
__device__ unsigned char* aligned_smem(unsigned char* smem) {
    const unsigned address = __cvta_generic_to_shared(smem);
    return smem + (SMEM_ALIGN - address % SMEM_ALIGN) % SMEM_ALIGN;
}

__device__ unsigned xor_words(uint4 vector) {
    return vector.x ^ vector.y ^ vector.z ^ vector.w;
}

// ---------------------------------------------------------------------------------------------------
// The work: the list of tiles, which of them a block takes, and the ring of stages they go through.
// ---------------------------------------------------------------------------------------------------

// Tile t of the list, ordered (batch, kv_head, row): its sequence, its head and its first row.
struct Tile {
    int batch, head, row0;
};

__device__ Tile tile_at(int t, int kv_len, int kv_heads) {
    const int tiles_per_head = kv_len / BLOCK_KV, unit = t / tiles_per_head;
    return {unit / kv_heads, unit % kv_heads, t % tiles_per_head * BLOCK_KV};
}

// The tiles block b of G takes, count of them, the i-th being tile(i). ITEM = CONTIGUOUS: one contiguous chunk
// of the list, tiles n b / G ... n (b + 1) / G - 1, as chapters 15-18's persistent blocks take their work. Else
// items of ITEM consecutive tiles dealt round, items b, b + G, b + 2G, ...: the blocks at work at once read
// neighbouring keys, where contiguous chunks have them read G places far apart. The last item may be short.
template <int ITEM>
struct Schedule {
    int count, first, stride;  // stride: from one of the block's items to its next

    __device__ explicit Schedule(int n_tiles) {
        const int block = blockIdx.x, grid = gridDim.x;
        stride = grid * ITEM;
        if (ITEM == CONTIGUOUS) {
            first = (long long)n_tiles * block / grid;
            count = (long long)n_tiles * (block + 1) / grid - first;
        } else {
            const int n_items = (n_tiles + ITEM - 1) / ITEM;
            first = block * ITEM;
            count = block < n_items ? ((n_items - 1 - block) / grid + 1) * ITEM : 0;
            if ((n_items - 1) % grid == block) count -= n_items * ITEM - n_tiles;  // its last item is the list's
        }
    }

    __device__ int tile(int i) const {
        return ITEM == CONTIGUOUS ? first + i : first + i / ITEM * stride + i % ITEM;
    }
};

// A block's place in the ring of stages: the stage its next tile goes to, and the parity of the phase that tile
// completes on that stage's barriers (0 on the first trip round the ring, 1 on the second, ...).
struct Stage {
    int index = 0, parity = 0;

    __device__ void advance() {
        if (++index == STAGES) {
            index = 0;
            parity ^= 1;
        }
    }
};

// Shared memory of readers 1-4: STAGES tiles of K, STAGES of V, then per stage a barrier that its tiles have
// landed (filled) and one that every consumer warp is done with them (free).
struct Buffers {
    unsigned char* k_tiles;
    unsigned char* v_tiles;
    unsigned long long* filled;
    unsigned long long* freed;

    __device__ explicit Buffers(unsigned char* smem) {
        k_tiles = aligned_smem(smem);
        v_tiles = k_tiles + STAGES * TILE_BYTES;
        filled = reinterpret_cast<unsigned long long*>(v_tiles + STAGES * TILE_BYTES);
        freed = filled + STAGES;
    }
};

// Arrivals that free a stage: one per consumer warp, as in chapter 19, where no consumer thread reads a
// tile itself. Under CHECKSUM every consumer thread reads the stage, so each one frees it: its own arrival orders
// its own reads before the producer's next copies into the stage.
__device__ constexpr int free_arrivals(bool checksum) {
    return checksum ? CONSUMER_THREADS : N_WARPS;
}

// One thread sets up the barriers; the block barrier publishes them before anyone waits on them.
template <bool CHECKSUM>
__device__ void init_barriers(const Buffers& buffers, int filled_arrivals) {
    if (threadIdx.x == 0) {
        for (int stage = 0; stage < STAGES; ++stage) {
            mbarrier_init(&buffers.filled[stage], filled_arrivals);
            mbarrier_init(&buffers.freed[stage], free_arrivals(CHECKSUM));
        }
        fence_barrier_init();
    }
    __syncthreads();
}

// The producer may refill a stage once the consumers have freed the tile STAGES before: on the first trip round
// the ring there is none, and after that the free barrier completes one phase per trip, the trip before this one.
__device__ void wait_until_free(const Buffers& buffers, const Stage& stage, int i) {
    if (i >= STAGES) mbarrier_wait(&buffers.freed[stage.index], stage.parity ^ 1);
}

// The consumers (warps 0 ... N_WARPS - 1): wait for each of the block's tiles to land and free its stage, one
// arrival per warp once all its lanes are there. Under CHECKSUM each thread first XORs its 16-byte chunks of the
// stage's K and V tiles and arrives itself, and in the end each warp adds its XOR into *xor_out.
template <bool CHECKSUM>
__device__ void consume(const Buffers& buffers, int count, unsigned* xor_out) {
    const int lane = threadIdx.x % 32;
    unsigned words = 0;
    Stage stage;
    for (int i = 0; i < count; ++i, stage.advance()) {
        mbarrier_wait(&buffers.filled[stage.index], stage.parity);
        if (CHECKSUM) {
            const uint4* k_tile = reinterpret_cast<const uint4*>(buffers.k_tiles + stage.index * TILE_BYTES);
            const uint4* v_tile = reinterpret_cast<const uint4*>(buffers.v_tiles + stage.index * TILE_BYTES);
            for (int chunk = threadIdx.x; chunk < TILE_BYTES / CHUNK_BYTES; chunk += CONSUMER_THREADS) {
                words ^= xor_words(k_tile[chunk]) ^ xor_words(v_tile[chunk]);
            }
        }
        __syncwarp();
        if (CHECKSUM || lane == 0) mbarrier_arrive(&buffers.freed[stage.index]);
    }
    if (CHECKSUM) {
        words = __reduce_xor_sync(0xffffffff, words);
        if (lane == 0) atomicXor(xor_out, words);
    }
}

// ---------------------------------------------------------------------------------------------------
// Readers 1 and 2: the TMA, one thread issuing every copy (chapter 19's producer).
// ---------------------------------------------------------------------------------------------------

// Rows [row0, row0 + BLOCK_KV) of one head. PLANES = 2: one box of 64 columns per plane, each written with the
// 128-byte swizzle, plane p at p x 16 KB (the layout wgmma reads). PLANES = 1: one box of all 128 columns,
// unswizzled (the 128-byte swizzle cannot span a 256-byte row), rows one after the other.
template <int PLANES>
__device__ void load_tile(unsigned char* tile, const TensorMap& map, const Tile& at, unsigned long long* barrier) {
#pragma unroll
    for (int plane = 0; plane < PLANES; ++plane) {
        tma_load(tile + plane * TILE_BYTES / PLANES, map, plane * HEAD_DIM / PLANES, at.head, at.row0, at.batch,
                 barrier);
    }
}

// Grid: one block per SM, each taking one contiguous chunk of the tile list (Schedule<CONTIGUOUS>). k_map and
// v_map: boxes of HEAD_DIM / PLANES columns by BLOCK_KV rows of one head.
template <int PLANES, bool CHECKSUM>
__global__ void __launch_bounds__(N_THREADS, 1)
tma_read(const __grid_constant__ TensorMap k_map, const __grid_constant__ TensorMap v_map, int batch, int kv_len,
         int kv_heads, unsigned* __restrict__ xor_out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Buffers buffers(smem);
    const Schedule<CONTIGUOUS> schedule(batch * kv_heads * (kv_len / BLOCK_KV));
    init_barriers<CHECKSUM>(buffers, 1);  // a filled barrier: the producer's arrival, and the bytes it announces
    if (threadIdx.x >= CONSUMER_THREADS) {
        if (threadIdx.x == CONSUMER_THREADS) {  // the producer warpgroup's first thread
            Stage stage;
            for (int i = 0; i < schedule.count; ++i, stage.advance()) {
                wait_until_free(buffers, stage, i);
                const Tile at = tile_at(schedule.tile(i), kv_len, kv_heads);
                mbarrier_arrive_expect_bytes(&buffers.filled[stage.index], 2 * TILE_BYTES);
                load_tile<PLANES>(buffers.k_tiles + stage.index * TILE_BYTES, k_map, at, &buffers.filled[stage.index]);
                load_tile<PLANES>(buffers.v_tiles + stage.index * TILE_BYTES, v_map, at, &buffers.filled[stage.index]);
            }
        }
        return;
    }
    consume<CHECKSUM>(buffers, schedule.count, xor_out);
}

// ---------------------------------------------------------------------------------------------------
// Readers 3 and 4: cp.async by the 128 threads of the producer warpgroup, in place of the TMA.
// ---------------------------------------------------------------------------------------------------

// Rows [row0, row0 + BLOCK_KV) of one head of a (batch, kv_len, kv_heads, HEAD_DIM) tensor, into the layout the
// TMA writes with the 128-byte swizzle: chunk c of row r of a plane at chunk c ^ (r % 8), plane p at p x 16 KB.
// Thread `producer` takes one 16-byte chunk of every eighth row: 16 chunks to a 256-byte row, 8 rows a pass, so a
// warp reads two whole rows per copy and a thread's rows share row % 8 and the place of its chunk.
__device__ void copy_tile_by_threads(unsigned char* tile, const unsigned char* tensor, const Tile& at, int kv_len,
                                     int kv_heads, int producer) {
    constexpr int PASS_ROWS = PRODUCER_THREADS / ROW_CHUNKS;
    const int chunk = producer % ROW_CHUNKS, row = producer / ROW_CHUNKS;
    const long long row_stride = (long long)kv_heads * ROW_BYTES;
    const unsigned char* from = tensor + ((long long)at.batch * kv_len + at.row0 + row) * row_stride +
                                at.head * ROW_BYTES + chunk * CHUNK_BYTES;
    const int plane = chunk / PLANE_CHUNKS, swizzled = (chunk % PLANE_CHUNKS) ^ (row % 8);
    unsigned to = __cvta_generic_to_shared(tile + plane * BLOCK_KV * PLANE_BYTES + row * PLANE_BYTES +
                                           swizzled * CHUNK_BYTES);
#pragma unroll 4
    for (int pass = 0; pass < BLOCK_KV / PASS_ROWS; ++pass) {
        cp_async_16(to, from);
        from += PASS_ROWS * row_stride;
        to += PASS_ROWS * PLANE_BYTES;
    }
}

// Grid: one block per SM. ITEM: which tiles a block takes (Schedule). k and v: (batch, kv_len, kv_heads, HEAD_DIM).
template <int ITEM, bool CHECKSUM>
__global__ void __launch_bounds__(N_THREADS, 1)
cp_async_read(const unsigned char* __restrict__ k, const unsigned char* __restrict__ v, int batch, int kv_len,
              int kv_heads, unsigned* __restrict__ xor_out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Buffers buffers(smem);
    const Schedule<ITEM> schedule(batch * kv_heads * (kv_len / BLOCK_KV));
    init_barriers<CHECKSUM>(buffers, PRODUCER_THREADS);  // filled: an arrival per producer thread, its copies landed
    if (threadIdx.x >= CONSUMER_THREADS) {
        const int producer = threadIdx.x - CONSUMER_THREADS;
        Stage stage;
        for (int i = 0; i < schedule.count; ++i, stage.advance()) {
            wait_until_free(buffers, stage, i);
            const Tile at = tile_at(schedule.tile(i), kv_len, kv_heads);
            copy_tile_by_threads(buffers.k_tiles + stage.index * TILE_BYTES, k, at, kv_len, kv_heads, producer);
            copy_tile_by_threads(buffers.v_tiles + stage.index * TILE_BYTES, v, at, kv_len, kv_heads, producer);
            cp_async_arrive(&buffers.filled[stage.index]);
        }
        return;
    }
    consume<CHECKSUM>(buffers, schedule.count, xor_out);
}

// ---------------------------------------------------------------------------------------------------
// Reader 5: 16-byte loads by every thread, nothing in shared memory: the read ceiling.
// ---------------------------------------------------------------------------------------------------

// k and v: n_vectors 16-byte vectors each. Grid: LOAD_BLOCKS_PER_SM blocks per SM, grid-stride: consecutive
// threads read consecutive vectors, so a warp's load is 512 contiguous bytes. The loads are ld.global.cs
// (evict-first): each byte is read once, so none need stay in the caches. Every thread XORs the words it read,
// so no load is dead, and each block adds its XOR into *xor_out.
__global__ void __launch_bounds__(LOAD_THREADS, LOAD_BLOCKS_PER_SM)
load_read(const uint4* __restrict__ k, const uint4* __restrict__ v, long long n_vectors, unsigned* __restrict__ xor_out) {
    __shared__ unsigned block_words;
    if (threadIdx.x == 0) block_words = 0;
    const long long stride = (long long)gridDim.x * LOAD_THREADS;
    long long vector = (long long)blockIdx.x * LOAD_THREADS + threadIdx.x;
    unsigned words = 0;
    // Whole passes first, every load of each in range: all 2 x LOAD_UNROLL issued before the first is used.
    const long long passes_end = n_vectors / (LOAD_UNROLL * stride) * (LOAD_UNROLL * stride);
    for (; vector < passes_end; vector += LOAD_UNROLL * stride) {
        uint4 k_vectors[LOAD_UNROLL], v_vectors[LOAD_UNROLL];
#pragma unroll
        for (int load = 0; load < LOAD_UNROLL; ++load) {
            k_vectors[load] = __ldcs(&k[vector + load * stride]);
            v_vectors[load] = __ldcs(&v[vector + load * stride]);
        }
#pragma unroll
        for (int load = 0; load < LOAD_UNROLL; ++load) words ^= xor_words(k_vectors[load]) ^ xor_words(v_vectors[load]);
    }
    for (; vector < n_vectors; vector += stride) words ^= xor_words(__ldcs(&k[vector])) ^ xor_words(__ldcs(&v[vector]));
    __syncthreads();  // block_words is zeroed
    words = __reduce_xor_sync(0xffffffff, words);
    if (threadIdx.x % 32 == 0) atomicXor(&block_words, words);
    __syncthreads();
    if (threadIdx.x == 0) atomicXor(xor_out, block_words);
}
