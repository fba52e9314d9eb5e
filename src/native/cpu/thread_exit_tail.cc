#include "cpu/thread_exit_tail.h"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>

#include "cpu/clock.h"
#include "cpu/thread_cpu_timer.h"

namespace peakline::cpu {
namespace {

// Room for the tails of 1024 threads that exit between two ticks (10 ms): more is a program
// that starts over 100,000 threads a second.
constexpr size_t kCapacity = 1024;

enum : uint32_t { kEmpty = 0, kWriting = 1, kFull = 2, kReading = 3 };

struct Entry {
  std::atomic<uint32_t> state{kEmpty};
  ExitTail tail{};
};

Entry g_entries[kCapacity];
std::atomic<uint32_t> g_full{0};     // entries in kFull: lets an empty table cost one load
std::atomic<uint32_t> g_next{0};     // where the next writer starts probing
std::atomic<uint64_t> g_dropped{0};

// What the ending thread said at its end; read back by its destructor.
struct Armed {
  uint32_t session;
  int64_t cpu_ns;
  int64_t system_ns;
};
__thread Armed t_armed __attribute__((tls_model("initial-exec")));

pthread_key_t g_key;
const bool g_key_ok = pthread_key_create(&g_key, [](void*) {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return;
  const Armed armed = t_armed;
  const int64_t cpu = TimespecNs(ts) - armed.cpu_ns;
  if (cpu <= 0) return;
  int64_t system = -1;
  rusage ru;
  if (armed.system_ns >= 0 && getrusage(RUSAGE_THREAD, &ru) == 0) {
    system = TimevalNs(ru.ru_stime) - armed.system_ns;
    system = system < 0 ? 0 : (system > cpu ? cpu : system);
  }
  const uint32_t start = g_next.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < kCapacity; ++i) {
    Entry& e = g_entries[(start + i) % kCapacity];
    uint32_t expected = kEmpty;
    if (e.state.compare_exchange_strong(expected, kWriting, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      e.tail = ExitTail{CurrentTid(), armed.session, cpu, system};
      e.state.store(kFull, std::memory_order_release);
      g_full.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  g_dropped.fetch_add(1, std::memory_order_relaxed);
}) == 0;

}  // namespace

bool ArmExitTail(uint32_t session, int64_t cpu_ns, int64_t system_ns) {
  if (!g_key_ok || cpu_ns < 0) return false;
  t_armed = Armed{session, cpu_ns, system_ns};
  // A key below PTHREAD_KEY_2NDLEVEL_SIZE: setting it allocates nothing.
  return pthread_setspecific(g_key, reinterpret_cast<void*>(1)) == 0;
}

size_t TakeExitTails(ExitTail* out, size_t max) {
  if (g_full.load(std::memory_order_acquire) == 0) return 0;
  size_t n = 0;
  for (size_t i = 0; i < kCapacity && n < max; ++i) {
    Entry& e = g_entries[i];
    uint32_t expected = kFull;
    if (e.state.compare_exchange_strong(expected, kReading, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      out[n++] = e.tail;
      e.state.store(kEmpty, std::memory_order_release);
      g_full.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  return n;
}

uint64_t DroppedExitTails() { return g_dropped.load(std::memory_order_relaxed); }

void ForgetExitTailsAfterFork() {
  // The child has one thread: no writer is half-way through an entry.
  for (Entry& e : g_entries) e.state.store(kEmpty, std::memory_order_relaxed);
  g_full.store(0, std::memory_order_relaxed);
}

}  // namespace peakline::cpu
