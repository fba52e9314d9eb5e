#include "cpu/thread_cpu_timer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cpu/clock.h"

namespace peakline::cpu {

int64_t ThreadCpuTimeNs(pid_t tid) {
  timespec ts;
  if (clock_gettime(ThreadCpuClock(tid), &ts) != 0) return -1;
  return TimespecNs(ts);
}

int64_t ThreadRunDelayNs(pid_t tid) {
  char path[64];
  // No snprintf: this may run often (once per waiting thread per tick).
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(tid); n == 0 || v != 0; v /= 10) digits[n++] = '0' + v % 10;
  static constexpr char kPrefix[] = "/proc/self/task/";
  static constexpr char kSuffix[] = "/schedstat";
  size_t len = 0;
  for (size_t i = 0; i + 1 < sizeof(kPrefix); ++i) path[len++] = kPrefix[i];
  while (n > 0) path[len++] = digits[--n];
  for (size_t i = 0; i < sizeof(kSuffix); ++i) path[len++] = kSuffix[i];  // with the NUL
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[96];
  const ssize_t got = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (got <= 0) return -1;
  buf[got] = '\0';
  // "<on-cpu ns> <run delay ns> <timeslices>\n"
  const char* p = buf;
  while (*p >= '0' && *p <= '9') ++p;
  if (*p != ' ') return -1;
  ++p;
  if (*p < '0' || *p > '9') return -1;
  int64_t value = 0;
  while (*p >= '0' && *p <= '9') value = value * 10 + (*p++ - '0');
  return value;
}

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

Status ArmThreadCpuTimer(pid_t tid, int signo, void* sival, int64_t interval_ns, int64_t first_ns,
                         timer_t* out) {
  sigevent sev;
  std::memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signo;
  sev.sigev_value.sival_ptr = sival;
  sev._sigev_un._tid = tid;
  timer_t timer;
  if (timer_create(ThreadCpuClock(tid), &sev, &timer) != 0) {
    return Status::FromErrno(errno, "timer_create");
  }
  itimerspec spec;
  spec.it_interval = ToTimespec(interval_ns);
  spec.it_value = ToTimespec(first_ns);
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  if (timer_settime(timer, 0, &spec, nullptr) != 0) {
    const int err = errno;
    timer_delete(timer);
    return Status::FromErrno(err, "timer_settime");
  }
  *out = timer;
  return Status();
}

}  // namespace peakline::cpu
