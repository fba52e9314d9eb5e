// Clang thread-safety annotations: the lock and GIL rules of the native core, written where
// the compiler checks them instead of in comments. With Clang and -Wthread-safety (the
// sanitizer builds, scripts/sanitize.sh, make every finding an error) an access to a
// PEAKLINE_GUARDED_BY field without its capability, or a call to a PEAKLINE_REQUIRES function
// from code that does not hold it, fails the build. Other compilers see nothing: every macro
// expands to nothing, and the code is the same.
//
// The capabilities: Mutex and PthreadMutex (mutex.h), and the GIL (python/gil.h). Names follow
// Clang's documentation (clang.llvm.org/docs/ThreadSafetyAnalysis.html), with the PEAKLINE_
// prefix.
#ifndef PEAKLINE_SYNC_THREAD_ANNOTATIONS_H_
#define PEAKLINE_SYNC_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define PEAKLINE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PEAKLINE_THREAD_ANNOTATION(x)
#endif

// A type whose objects are capabilities (a lock); `name` appears in the warnings.
#define PEAKLINE_CAPABILITY(name) PEAKLINE_THREAD_ANNOTATION(capability(name))
// An RAII type that holds a capability from its constructor to its destructor.
#define PEAKLINE_SCOPED_CAPABILITY PEAKLINE_THREAD_ANNOTATION(scoped_lockable)
// A field read or written only while holding `x`.
#define PEAKLINE_GUARDED_BY(x) PEAKLINE_THREAD_ANNOTATION(guarded_by(x))
// A pointer field whose pointee is read or written only while holding `x`.
#define PEAKLINE_PT_GUARDED_BY(x) PEAKLINE_THREAD_ANNOTATION(pt_guarded_by(x))
// The caller must hold (REQUIRES) or must not hold (EXCLUDES) the capabilities.
#define PEAKLINE_REQUIRES(...) PEAKLINE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define PEAKLINE_EXCLUDES(...) PEAKLINE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function takes (ACQUIRE), gives up (RELEASE) or may take (TRY_ACQUIRE: when it returns
// the first argument) the capabilities; with none named, `this`.
#define PEAKLINE_ACQUIRE(...) PEAKLINE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define PEAKLINE_RELEASE(...) PEAKLINE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define PEAKLINE_TRY_ACQUIRE(...) PEAKLINE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// From a call to this function on, the capability counts as held (a callback that some other
// code runs with the capability held, where the analysis cannot see it taken).
#define PEAKLINE_ASSERT_CAPABILITY(x) PEAKLINE_THREAD_ANNOTATION(assert_capability(x))
// The function returns a reference to the capability `x`.
#define PEAKLINE_RETURN_CAPABILITY(x) PEAKLINE_THREAD_ANNOTATION(lock_returned(x))
// Opts a function out of the analysis: only for the wrappers that implement a capability.
#define PEAKLINE_NO_THREAD_SAFETY_ANALYSIS PEAKLINE_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // PEAKLINE_SYNC_THREAD_ANNOTATIONS_H_
