// Fibers for the host emulation: one per emulated CUDA thread, switched cooperatively on one OS
// thread. Creation writes an initial frame on a pooled stack; a switch saves the callee-saved
// registers and the stack pointer of one fiber and restores another's.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#if !defined(__x86_64__) || defined(DG_EMU_FORCE_UCONTEXT)
#define DG_EMU_UCONTEXT 1
#include <ucontext.h>
#endif

namespace dg::emu {

using FiberEntry = void (*)(void* arg);

// Note [Fiber switch]
// Swapcontext saves and restores the signal mask, a system call per switch,
// which would dominate an emulated __syncthreads. On x86-64 a switch is instead a naked function
// that pushes the six callee-saved registers, stores the stack pointer, loads the other fiber's
// and pops the same set. (MXCSR and the x87 control word are callee-saved too, but CUDA code has
// no way to change them, so they are left alone.) A new fiber's stack is prepared so that this
// pop sequence "returns" into a start stub, which calls entry(arg) on an ABI-aligned stack. Other
// architectures (and -DDG_EMU_FORCE_UCONTEXT) use makecontext/swapcontext: slower, same semantics.
// A fiber never migrates between OS threads, so thread_local addresses that the compiler caches
// across a switch stay valid (see Note [Shared memory as thread_local]).
#if !defined(DG_EMU_UCONTEXT)

struct FiberContext {
  void* sp = nullptr;
};

// The switch itself (Note [Fiber switch]).
[[maybe_unused]] __attribute__((naked, noinline)) static void dg_emu_switch_impl(void** /*save*/,
                                                                                 void* /*next*/) {
  asm("pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

// Reached by the first switch into a fiber: r12 holds the argument and r13 the entry point.
[[maybe_unused]] __attribute__((naked, noinline)) static void dg_emu_fiber_start() {
  asm("movq %r12, %rdi\n\t"
      "callq *%r13\n\t"
      "ud2\n\t");
}

inline void fiber_init(FiberContext* ctx, char* stack_lo, size_t stack_size, FiberEntry entry,
                       void* arg) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack_lo) + stack_size) & ~uintptr_t{15};
  // After the final `ret` rsp must be 16-byte aligned, so that the stub's call is ABI-conformant.
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 16 - 7 * 8);
  sp[0] = 0;                                                // r15
  sp[1] = 0;                                                // r14
  sp[2] = reinterpret_cast<uint64_t>(entry);                // r13
  sp[3] = reinterpret_cast<uint64_t>(arg);                  // r12
  sp[4] = 0;                                                // rbx
  sp[5] = 0;                                                // rbp
  sp[6] = reinterpret_cast<uint64_t>(&dg_emu_fiber_start);  // return address
  ctx->sp = sp;
}

// Saves the running context into `from` and resumes `to`.
// The compiler barriers keep memory accesses from being moved across the switch even if the
// optimizer were to see through the naked call.
inline void fiber_switch(FiberContext* from, FiberContext* to) {
  asm volatile("" ::: "memory");
  dg_emu_switch_impl(&from->sp, to->sp);
  asm volatile("" ::: "memory");
}

#else  // DG_EMU_UCONTEXT

struct FiberContext {
  ucontext_t uc;
};

inline void dg_emu_ucontext_start(unsigned int entry_hi, unsigned int entry_lo, unsigned int arg_hi,
                                  unsigned int arg_lo) {
  auto join = [](unsigned int hi, unsigned int lo) {
    return static_cast<uintptr_t>((static_cast<uint64_t>(hi) << 32) | lo);
  };
  FiberEntry entry = reinterpret_cast<FiberEntry>(join(entry_hi, entry_lo));
  entry(reinterpret_cast<void*>(join(arg_hi, arg_lo)));
  std::abort();  // entry never returns
}

inline void fiber_init(FiberContext* ctx, char* stack_lo, size_t stack_size, FiberEntry entry,
                       void* arg) {
  getcontext(&ctx->uc);
  ctx->uc.uc_stack.ss_sp = stack_lo;
  ctx->uc.uc_stack.ss_size = stack_size;
  ctx->uc.uc_link = nullptr;
  uint64_t e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
  makecontext(&ctx->uc, reinterpret_cast<void (*)()>(&dg_emu_ucontext_start), 4,
              static_cast<unsigned int>(e >> 32), static_cast<unsigned int>(e),
              static_cast<unsigned int>(a >> 32), static_cast<unsigned int>(a));
}

inline void fiber_switch(FiberContext* from, FiberContext* to) { swapcontext(&from->uc, &to->uc); }

#endif  // DG_EMU_UCONTEXT

// A fiber stack: `size` usable bytes above a PROT_NONE guard page at `lo - page`, so that an
// overflow faults instead of corrupting a neighbour.
struct FiberStack {
  char* lo = nullptr;
  size_t size = 0;
};

// Stacks are mapped once and reused by every block and launch of a module (Note [Stack pool]).
class StackPool {
 public:
  ~StackPool() {
    for (const FiberStack& s : free_) unmap(s);
  }

  FiberStack acquire(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!free_.empty()) {
        FiberStack s = free_.back();
        free_.pop_back();
        if (s.size == size) return s;
        unmap(s);
      }
    }
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p =
        mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    mprotect(p, page, PROT_NONE);
    return FiberStack{static_cast<char*>(p) + page, size};
  }

  void release(const FiberStack* stacks, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.insert(free_.end(), stacks, stacks + n);
    while (free_.size() > kKeep) {  // Note [Stack pool]: what a launch used beyond kKeep goes
      unmap(free_.back());
      free_.pop_back();
    }
  }

  static StackPool& instance() {
    static StackPool pool;
    return pool;
  }

 private:
  static void unmap(const FiberStack& s) {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    munmap(s.lo - page, s.size + page);
  }
  static constexpr size_t kKeep = 8;
  std::mutex mu_;
  std::vector<FiberStack> free_;
};

// Note [Stack pool]
// A worker takes stacks from the pool when a launch starts using it and gives
// them back when the launch ends. Within a block a fiber gets a stack only when it first runs and
// returns it when it exits; a kernel without barriers therefore cycles through one or two warm
// stacks however large the block is, and its launches map nothing. The pool keeps at most kKeep
// stacks between launches and unmaps the rest: each kernel module has its own pool (the modules
// are loaded RTLD_LOCAL), a stack is two mappings (its guard page splits it), and a block with
// barriers holds one stack per thread, so pools that kept every stack held about 600 mappings
// per module; a process that had run a few hundred modules (the Python suite) reached the
// kernel's vm.max_map_count (65530) and mmap failed (std::bad_alloc in the emulator, and a
// dlopen "failed to map segment"). A launch of a kernel with barriers now maps its stacks anew.

}  // namespace dg::emu
