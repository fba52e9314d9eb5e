#include "engine/thread_cpu_timer.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace peakline::engine {

int64_t ThreadCpuTimeNs(pid_t tid) {
  timespec ts;
  if (clock_gettime(ThreadCpuClock(tid), &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

int ArmThreadCpuTimer(pid_t tid, int signo, void* sival, int64_t interval_ns, int64_t first_ns,
                      timer_t* out) {
  sigevent sev;
  std::memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signo;
  sev.sigev_value.sival_ptr = sival;
  sev._sigev_un._tid = tid;
  timer_t timer;
  if (timer_create(ThreadCpuClock(tid), &sev, &timer) != 0) return errno;
  itimerspec spec;
  spec.it_interval.tv_sec = interval_ns / 1000000000;
  spec.it_interval.tv_nsec = interval_ns % 1000000000;
  spec.it_value.tv_sec = first_ns / 1000000000;
  spec.it_value.tv_nsec = first_ns % 1000000000;
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  if (timer_settime(timer, 0, &spec, nullptr) != 0) {
    const int err = errno;
    timer_delete(timer);
    return err;
  }
  *out = timer;
  return 0;
}

}  // namespace peakline::engine
