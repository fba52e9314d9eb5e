// ThreadSlot: everything the sampler keeps about one sampled OS thread.
//
// Ownership and guards:
//  - Taken, armed, drained and retired only by the sampling session, with the GIL held (its
//    tick thread, the final drain, or a Python thread announcing its own start or end:
//    SamplingSession::ThreadStarted / ThreadFinishing); the GIL guards the slot table.
//  - `ring`'s producer side and `last_cpu_ns` / `last_system_ns` belong to the thread's own
//    signal handler once the timer is armed (handler-only; never nests on one thread).
//  - `dropped` and `samples` are atomics that anyone may read.
// A slot is never freed: a retired one goes back to a pool for the next thread
// (session/sampling_session.cc, SlotPool), and its entry in the handler's registry of tick
// targets stays (cpu_signal_handler.h, CpuTickValue), because a tick queued before
// timer_delete may still arrive carrying the slot's token.
#ifndef PEAKLINE_CPU_THREAD_SLOT_H_
#define PEAKLINE_CPU_THREAD_SLOT_H_

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "transport/spsc_ring.h"

namespace peakline::cpu {

// Off-CPU time of one thread between observations of it (its own CPU samples and the
// session's ticks), each a (wall, thread CPU) pair: the wall time between two observations
// that the thread did not run. Observations may arrive out of order (a sample taken while the
// tick measured is drained at the next tick): one not later than the last is ignored, its
// time having been measured already.
struct WaitMeter {
  int64_t last_wall_ns = 0;
  int64_t last_cpu_ns = 0;

  void Reset(int64_t wall_ns, int64_t cpu_ns) {
    last_wall_ns = wall_ns;
    last_cpu_ns = cpu_ns;
  }
  // Returns the off-CPU time since the previous observation (0 if none), or -1 if this
  // observation is not later than it.
  int64_t Observe(int64_t wall_ns, int64_t cpu_ns) {
    if (wall_ns <= last_wall_ns) return -1;
    const int64_t off = (wall_ns - last_wall_ns) - (cpu_ns - last_cpu_ns);
    last_wall_ns = wall_ns;
    last_cpu_ns = cpu_ns;
    return off > 0 ? off : 0;
  }
};

// Splits the off-CPU time a WaitMeter charged into run delay (runnable but not scheduled:
// other processes on the thread's CPU, a container's CPU quota) and wait (sleep, I/O, locks,
// the GIL). The kernel counts a thread's run delay (/proc/self/task/TID/schedstat, second
// field) but cannot say on which line it happened; the wait meter knows the lines. So every
// off-CPU charge is remembered until the next reading of the kernel's counter (once per
// tick), and the run delay that accrued since the previous reading is taken out
// of those charges in proportion to their size. Within one tick (20 ms) the split is
// therefore proportional; across ticks it follows the kernel. A thread that only runs and
// competes for a CPU has all its off-CPU time as run delay; one that sleeps has none.
// SamplingSession-owned (never touched by a signal handler).
struct RunDelayMeter {
  struct Charge {
    uint32_t stack;
    int64_t off_ns;
  };
  int64_t last_run_delay_ns = -1;  // the kernel's counter at the last reading; -1: unknown
  std::vector<Charge> pending;      // off-CPU time charged since that reading
  // Readings still to skip: a thread whose last reading found no new run delay is blocked
  // (sleeping, waiting on a lock), and an idle pool of 64 threads read every tick would cost
  // 2% of a CPU (6 us a reading). Its charges then wait for the next reading, up to
  // kIdleReadingTicks later — or the first tick after it ran again (a sample's charge), so
  // that the run delay of a thread that woke up is split over at most that one window.
  int skip_readings = 0;
  bool ran = false;  // a sample's charge is pending
  static constexpr int kIdleReadingTicks = 10;

  void Reset(int64_t run_delay_ns) {
    last_run_delay_ns = run_delay_ns;
    pending.clear();
    skip_readings = 0;
    ran = false;
  }
  // Whether this tick should read the counter (force: the thread's last chance, at its end
  // or the session's).
  bool DueForReading(bool force) {
    if (pending.empty()) return false;  // nothing charged since the last reading
    if (force || ran || skip_readings <= 0) return true;
    --skip_readings;
    return false;
  }
  // from_sample: charged by one of the thread's own samples (it ran), not by a tick.
  void Add(uint32_t stack, int64_t off_ns, bool from_sample) {
    ran |= from_sample;
    if (!pending.empty() && pending.back().stack == stack) {
      pending.back().off_ns += off_ns;
    } else {
      pending.push_back(Charge{stack, off_ns});
    }
  }
  // A new reading of the kernel's counter (-1: unreadable, the thread is gone). Calls
  // move(stack, ns) for the run delay part of each pending charge (never more than the
  // charge: run delay beyond the charged off-CPU time, from the few microseconds between the
  // wall-clock observation and this reading, is dropped) and returns the total moved.
  template <typename Move>
  int64_t Split(int64_t run_delay_ns, Move&& move) {
    int64_t moved = 0;
    if (run_delay_ns >= 0 && last_run_delay_ns >= 0 && run_delay_ns > last_run_delay_ns) {
      int64_t charged = 0;
      for (const Charge& c : pending) charged += c.off_ns;
      const int64_t delay = run_delay_ns - last_run_delay_ns;
      if (charged > 0) {
        const double share = delay >= charged ? 1.0 : static_cast<double>(delay) / charged;
        for (const Charge& c : pending) {
          const auto part = static_cast<int64_t>(static_cast<double>(c.off_ns) * share);
          if (part > 0) {
            move(c.stack, part);
            moved += part;
          }
        }
      }
    }
    if (run_delay_ns >= 0) last_run_delay_ns = run_delay_ns;
    pending.clear();
    ran = false;
    skip_readings = moved > 0 ? 0 : kIdleReadingTicks - 1;
    return moved;
  }
};

struct ThreadSlot {
  explicit ThreadSlot(size_t ring_bytes) : ring(ring_bytes) {}

  // SamplingSession only, while no handler can run for this slot (new or pooled slot).
  void Reset(pid_t tid_in) {
    tid = tid_in;
    python = false;
    ring.Reset();
    last_cpu_ns = 0;
    last_system_ns = -1;
    armed = false;
    wait.Reset(0, 0);
    run_delay.Reset(-1);
    cpu_ns = wait_ns = run_delay_ns = base_cpu_ns = 0;
    has_last_stack = false;
    last_stack = 0;
    last_native = false;
  }

  pid_t tid = 0;
  bool python = false;  // has a Python thread state now (session-owned)
  transport::SpscRing ring;

  // Handler-owned (after arming).
  int64_t last_cpu_ns = 0;
  int64_t last_system_ns = -1;  // -1: not known yet, first sample charges no system time

  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> dropped{0};

  // SamplingSession-owned.
  timer_t timer{};
  bool armed = false;
  WaitMeter wait;
  int64_t cpu_ns = 0;          // sampled CPU time drained so far
  RunDelayMeter run_delay;
  int64_t wait_ns = 0;         // off-CPU time measured so far, less its run delay
  int64_t run_delay_ns = 0;    // run delay split off wait_ns so far
  // The thread's CPU clock that the first sample's delta counts from (0 for a thread born in
  // the session): base_cpu_ns + cpu_ns is the clock at the last drained sample.
  int64_t base_cpu_ns = 0;
  bool has_last_stack = false;  // last_stack: the stack the last drained sample was charged to
  uint32_t last_stack = 0;
  bool last_native = false;
};

}  // namespace peakline::cpu

#endif  // PEAKLINE_CPU_THREAD_SLOT_H_
