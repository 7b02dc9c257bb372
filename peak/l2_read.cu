// The ceiling of L2: how many bytes per second the SMs can read from a buffer that stays in L2.
//
// Every query block of a head reads all of that head's K and V tiles, so most of a chapter's loads can be
// served by L2 rather than DRAM. Here every thread reads LOADS 16-byte vectors per pass over a buffer of
// exactly grid * N_THREADS * LOADS vectors (the caller keeps it under half the L2), and makes n_passes
// passes. Consecutive threads read consecutive vectors, so one load of a warp is 512 contiguous bytes, four
// whole 128-byte lines.
//
// The loads are ld.relaxed.gpu: loads of the memory model at GPU scope, which an SM's own L1 cannot serve,
// so every one goes to L2. The cache hint ld.global.cg alone is not enough: it is a weak load, and the
// compiler moves a weak load that reads the same address in every pass out of the loop; a relaxed load it
// must perform each time. Their sum is written out, one word per thread, so none of them is dead either.

constexpr int N_THREADS = 256;
// Vectors in flight per thread: all issued before the first is used, so each SM has many loads outstanding
// at once, which is what covers the latency of L2 (bytes in flight = bandwidth * latency).
constexpr int LOADS = 4;

__device__ uint4 load_from_l2(const uint4* address) {
    uint4 v;
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(address));
    return v;
}

// buffer: grid * N_THREADS * LOADS vectors; out: one word per thread, the sum of every word it read.
__global__ void __launch_bounds__(N_THREADS)
l2_read(const uint4* __restrict__ buffer, unsigned* __restrict__ out, int n_passes) {
    const int n_threads = gridDim.x * N_THREADS;
    const int thread = blockIdx.x * N_THREADS + threadIdx.x;
    unsigned sum = 0;
    for (int pass = 0; pass < n_passes; ++pass) {
        uint4 vectors[LOADS];
#pragma unroll
        for (int load = 0; load < LOADS; ++load) vectors[load] = load_from_l2(&buffer[load * n_threads + thread]);
#pragma unroll
        for (int load = 0; load < LOADS; ++load) {
            sum += vectors[load].x + vectors[load].y + vectors[load].z + vectors[load].w;
        }
    }
    out[thread] = sum;
}
