// cuda_emu.h: run aicc's generated CUDA C on the host, to test it without a GPU.
//
// The CUDA execution model, emulated: a launch runs its blocks one after another; each block's
// threads are OS threads (std::thread), created once per launch and reused for every block;
// blockIdx/threadIdx are thread_local; __syncthreads is a reusable barrier over the block;
// __shared__ variables are function statics, so there is one copy for the block that runs;
// __shfl_xor_sync exchanges values through a per-warp scratch array between two warp barriers.
//
// The thread_local state is defined once, in the runtime library that emu.py builds from this
// header with AICC_EMU_RUNTIME defined; every program library declares it extern and links
// against that library. A thread_local defined in each program would make every program a new
// dynamic-TLS module of the process, and glibc's loader fails a TLS assertion in pthread_create
// after some hundreds of them.
#pragma once
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

namespace aicc_emu {

class Barrier {  // reusable: generation counter against spurious and early wake-ups
 public:
  explicit Barrier(unsigned n = 1) : n_(n) {}
  void reset(unsigned n) { n_ = n; count_ = 0; }
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    unsigned gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != gen_; });
    }
  }
 private:
  std::mutex m_;
  std::condition_variable cv_;
  unsigned n_, count_ = 0, gen_ = 0;
};

struct Launch {
  Barrier block_barrier;
  std::vector<Barrier*> warp_barriers;
  std::vector<uint64_t> scratch;  // one 8-byte slot per thread, for shuffles
  ~Launch() { for (auto* b : warp_barriers) delete b; }
};

#ifdef AICC_EMU_RUNTIME
#define AICC_EMU_TLS thread_local
#else
#define AICC_EMU_TLS extern thread_local
#endif

AICC_EMU_TLS Launch* current;
AICC_EMU_TLS unsigned linear_tid;

}  // namespace aicc_emu

AICC_EMU_TLS dim3 threadIdx, blockIdx, blockDim, gridDim;

inline void __syncthreads() { aicc_emu::current->block_barrier.wait(); }

template <typename T>
inline T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  auto* L = aicc_emu::current;
  unsigned t = aicc_emu::linear_tid, warp = t / 32, lane = t % 32;
  unsigned src = warp * 32 + (lane ^ (unsigned)lane_mask);
  std::memcpy(&L->scratch[t], &v, sizeof(T));
  L->warp_barriers[warp]->wait();
  T out = v;
  if (src < L->scratch.size()) std::memcpy(&out, &L->scratch[src], sizeof(T));
  L->warp_barriers[warp]->wait();  // nobody overwrites a slot before all have read it
  return out;
}

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
using std::fmaf;
// __dp4a (sm_61+): c plus the four products of the signed bytes of a and b, wrapping in int32
inline int __dp4a(int a, int b, int c) {
  unsigned s = (unsigned)c;
  for (int i = 0; i < 4; ++i)
    s += (unsigned)((int)(int8_t)(uint8_t)((unsigned)a >> (8 * i)) * (int)(int8_t)(uint8_t)((unsigned)b >> (8 * i)));
  return (int)s;
}
// IEEE round-to-nearest division (what the CUDA intrinsic guarantees under --prec-div=false)
inline float __fdiv_rn(float a, float b) { return a / b; }
// The device's fast exp (ex2.approx of x * log2 e) is within a few ulp where kernels use it
// (arguments <= 0); the host's expf stands in for it.
inline float __expf(float x) { return expf(x); }

// Run `body` (the kernel called with its arguments) over grid x block.
template <typename F>
void aicc_emu_run(dim3 grid, dim3 block, F body) {
  aicc_emu::Launch L;
  unsigned nt = block.x * block.y * block.z;
  L.block_barrier.reset(nt);
  for (unsigned w = 0; w < (nt + 31) / 32; ++w)
    L.warp_barriers.push_back(new aicc_emu::Barrier(std::min(32u, nt - 32 * w)));
  L.scratch.assign(nt, 0);
  aicc_emu::Barrier end_of_block(nt);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < nt; ++t) {
    threads.emplace_back([&, t] {
      aicc_emu::current = &L;
      aicc_emu::linear_tid = t;
      threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      blockDim = block;
      gridDim = grid;
      for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
          for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = dim3(bx, by, bz);
            body();
            end_of_block.wait();  // the next block may reuse __shared__ statics
          }
    });
  }
  for (auto& th : threads) th.join();
}

// Launch `kernel` with CUDA's argument convention: args[i] points at the i-th argument.
template <typename... Args, std::size_t... I>
void aicc_emu_call(void (*kernel)(Args...), void** args, std::index_sequence<I...>) {
  kernel(*reinterpret_cast<std::remove_reference_t<Args>*>(args[I])...);
}

template <typename... Args>
void aicc_emu_launch(void (*kernel)(Args...), dim3 grid, dim3 block, void** args) {
  aicc_emu_run(grid, block, [&] { aicc_emu_call(kernel, args, std::index_sequence_for<Args...>{}); });
}
