// The threads peakline starts (the session's tick thread, the event stager, the NVML poller)
// must never take a signal meant for the program. A process-directed signal (SIGTERM from
// Pool.terminate(), SIGINT, SIGCHLD, ...) goes to any thread that does not block it, and CPython runs Python
// handlers only in the main thread, after the signal has interrupted whatever system call the
// main thread was blocked in. Had the kernel picked one of our threads, a pool worker blocked
// in sem_wait() would never wake to run its SIGTERM handler (seen: a hung Pool(fork) test).
//
// A new thread inherits its creator's signal mask, so the mask is set around the creation:
// the thread never has a moment with the signals unblocked. Synchronous signals (a fault in
// our own code) are left alone: blocking them is undefined behaviour.
#ifndef PEAKLINE_SESSION_OWN_THREADS_H_
#define PEAKLINE_SESSION_OWN_THREADS_H_

#include <pthread.h>
#include <signal.h>

namespace peakline::session {

class BlockSignalsForNewThreads {
 public:
  BlockSignalsForNewThreads() {
    sigset_t all;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&all, s);
    ok_ = pthread_sigmask(SIG_BLOCK, &all, &saved_) == 0;
  }
  ~BlockSignalsForNewThreads() {
    if (ok_) pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  BlockSignalsForNewThreads(const BlockSignalsForNewThreads&) = delete;
  BlockSignalsForNewThreads& operator=(const BlockSignalsForNewThreads&) = delete;

 private:
  sigset_t saved_;
  bool ok_ = false;
};

// Names a thread (shown by top -H, gdb, py-spy, /proc/PID/task/TID/comm); at most 15
// characters. The creator names the new thread as soon as it exists, so nobody looking at the
// process sees an unnamed copy of the creator's name ("python") while the thread starts.
inline void NameThread(pthread_t thread, const char* name) { pthread_setname_np(thread, name); }
inline void NameThisThread(const char* name) { NameThread(pthread_self(), name); }

}  // namespace peakline::session

#endif  // PEAKLINE_SESSION_OWN_THREADS_H_
