// The record a CPU-timer signal handler (cpu/cpu_signal_handler.cc, OnCpuTimer) writes into
// its thread's SpscRing, and that the sampling session's tick reads back
// (session/sampling_session.cc, DrainRing and ProcessSample). Plain data, fixed header
// followed by `nframes` RawFrame entries, innermost (leaf) frame first.
//
//   offset  size  field
//   0       8     cpu_delta_ns     thread CPU time since this thread's previous recorded sample
//   8       8     system_delta_ns  part of it spent in the kernel (getrusage stime delta)
//   16      2     nframes
//   18      1     kind             SampleKind
//   19      1     flags            kFlagTruncated (the stack was cut at the capture budget)
//   20      4     invalid_frames   frames dropped by validation (bad type or instruction)
//   24      8     wall_ns          CLOCK_MONOTONIC when the sample was taken (0: no stack
//                                  capture installed)
//   32      16*n  frames           {const void* code; int32 lasti (code units, -1 = before
//                                   the first instruction); int32 reserved (kForeignFrame:
//                                   read from the main thread, see python_frames.h)}
//
// The frames are the thread's own stack (none for a kNoThread sample), then — for any thread
// but the main one — the main thread's stack as last read (python/main_stack_cache.h: at most
// a few ms old, or unchanged since), marked kForeignFrame. The session appends those as
// callers only when the thread's own stack has no frame of a reported file
// (SamplingSession::StitchToMain); otherwise it drops them.
#ifndef PEAKLINE_TRANSPORT_SAMPLE_RECORD_H_
#define PEAKLINE_TRANSPORT_SAMPLE_RECORD_H_

#include <cstdint>

namespace peakline::transport {

enum class SampleKind : uint8_t {
  kPython = 0,    // executing bytecode (or interpreter work on behalf of a non-call op)
  kNative = 1,    // inside native code called from the current line
  kNoThread = 2,  // a thread with no Python thread state (BLAS, torch workers, ...)
};

inline constexpr uint8_t kFlagTruncated = 1;

struct RawFrame {
  const void* code;
  int32_t lasti;
  int32_t reserved;
};
static_assert(sizeof(RawFrame) == 16);

struct SampleHeader {
  int64_t cpu_delta_ns;
  int64_t system_delta_ns;
  uint16_t nframes;
  SampleKind kind;
  uint8_t flags;
  int32_t invalid_frames;
  int64_t wall_ns = 0;
};
static_assert(sizeof(SampleHeader) == 32);

inline constexpr int kMaxFrames = 128;
inline constexpr int kMaxRecordBytes = sizeof(SampleHeader) + kMaxFrames * sizeof(RawFrame);

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_SAMPLE_RECORD_H_
