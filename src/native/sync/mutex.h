// Mutex, MutexLock, CondVar and PthreadMutex: the native core's locks, as capabilities that
// Clang's thread-safety analysis checks (thread_annotations.h). Each call is an inline
// forward to the standard type it wraps: the same code as before, with the rules stated.
//
// Not for the hot paths: a malloc hook or a signal handler never takes a lock.
#ifndef PEAKLINE_SYNC_MUTEX_H_
#define PEAKLINE_SYNC_MUTEX_H_

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "sync/thread_annotations.h"

namespace peakline {

// std::mutex.
class PEAKLINE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() PEAKLINE_ACQUIRE() PEAKLINE_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void Unlock() PEAKLINE_RELEASE() PEAKLINE_NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::lock_guard).
class PEAKLINE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) PEAKLINE_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() PEAKLINE_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// std::condition_variable over a Mutex. Wake-ups may be spurious: wait in a loop that tests
// the guarded condition (the analysis checks that test, where a predicate lambda would
// escape it).
class CondVar {
 public:
  // Releases mu while it waits; holds it again on return. False when `deadline` passed.
  bool WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      PEAKLINE_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    (void)lock.release();  // still held: the caller's scope releases it
    return notified;
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A pthread mutex, for a lock that is only tried where the calling thread may be its holder:
// pthread_mutex_trylock then fails with EBUSY, which is defined, where std::mutex::try_lock
// is not.
class PEAKLINE_CAPABILITY("mutex") PthreadMutex {
 public:
  PthreadMutex() = default;
  PthreadMutex(const PthreadMutex&) = delete;
  PthreadMutex& operator=(const PthreadMutex&) = delete;

  void Lock() PEAKLINE_ACQUIRE() PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
    pthread_mutex_lock(&mu_);
  }
  // True when it took the lock.
  bool TryLock() PEAKLINE_TRY_ACQUIRE(true) PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
    return pthread_mutex_trylock(&mu_) == 0;
  }
  void Unlock() PEAKLINE_RELEASE() PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
    pthread_mutex_unlock(&mu_);
  }
  // For a callback that runs while its caller holds the lock (dl_iterate_phdr's): checks
  // nothing at run time, tells the analysis.
  void AssertHeld() const PEAKLINE_ASSERT_CAPABILITY(this) {}

 private:
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
};

}  // namespace peakline

#endif  // PEAKLINE_SYNC_MUTEX_H_
