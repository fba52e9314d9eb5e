// MemoryAggregator: turns the hooks' MemoryEvents into per-stack and per-line memory figures.
//
// For each sampled allocation it resolves the stack, charges the weight to that stack
// (python or native), remembers the block so its free is charged back to the same stack,
// and tracks the live bytes of the *attribution line* (the innermost frame in a reported file,
// decided by the Python FileSelection passed in) for the per-line timelines that the leak
// detector reads. Peak attribution is lazy (O(1) per event): a kPeak event starts a new
// epoch, and the first change to a stack or line in an epoch saves its value from before the
// change — so at the end, "live at the last peak" is the saved value if the stack changed
// after that peak, else its current value.
//
// Guarded by the GIL (driven by SamplingSession::Tick and the final drain).
#ifndef PEAKLINE_AGGREGATE_MEMORY_AGGREGATOR_H_
#define PEAKLINE_AGGREGATE_MEMORY_AGGREGATOR_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aggregate/reported_files.h"
#include "aggregate/stack_table.h"
#include "python/code_resolver.h"
#include "python/gil.h"
#include "sync/thread_annotations.h"
#include "transport/event_stager.h"
#include "transport/memory_event.h"

namespace peakline::aggregate {

struct TimePoint {
  int64_t t_ns;
  int64_t bytes;
};

struct LineMemory {
  uint32_t file_id;
  int32_t lineno;
  int64_t live_bytes = 0;
  uint64_t peak_epoch = 0;
  int64_t live_at_epoch_start = 0;
  bool changed = false;           // since the last tick
  int64_t changed_at_ns = 0;      // CLOCK_MONOTONIC of its last change (0: unknown)
  std::vector<TimePoint> timeline;
};

class MemoryAggregator {
 public:
  // stitch: for an event of thread tid whose stack (frame ids, leaf first) has no reported
  // frame, appends the main thread's stack at the time of the event (main_frames, the
  // event's kForeignFrame frames) or, when that is unknown, at the previous tick (see
  // SamplingSession::StitchToMain).
  using Stitch = std::function<void(pid_t tid, std::vector<uint32_t>* ids,
                                    const transport::RawFrame* main_frames, int n_main)>;
  // events: where the events come from; nullptr: the allocation hooks' ring
  // (hooks::MemoryEventRing(), asked at each use: the hooks create it after the session, and a
  // fork child forgets it). A unit test passes a ring it writes synthetic events into.
  MemoryAggregator(StackTable* table, python::CodeResolver* resolver, ReportedFiles* reported,
                   int64_t start_ns, Stitch stitch, transport::MpscRing* events);

  // GIL held, after the hooks started: starts the thread that stages the events' ring while
  // the GIL is held elsewhere (transport/event_stager.h). StopStaging joins it (GIL released or
  // held: it never takes the GIL).
  void StartStaging() PEAKLINE_REQUIRES(python::gil);
  void StopStaging() { stager_.Stop(); }
  // GIL held: drain what was staged, then the events' ring.
  void Drain() PEAKLINE_REQUIRES(python::gil);
  // GIL held: once per tick — global timeline point(s) and per-line timeline points.
  void OnTick(int64_t now_ns) PEAKLINE_REQUIRES(python::gil);

  int64_t LiveAtPeak(const StackCounters& c) const {
    return c.peak_epoch == peak_epoch_ ? c.live_at_epoch_start : c.live_bytes;
  }
  int64_t LiveAtPeak(const LineMemory& l) const {
    return l.peak_epoch == peak_epoch_ ? l.live_at_epoch_start : l.live_bytes;
  }
  // The estimated variance of LiveAtPeak(c) (bytes^2).
  double LiveAtPeakVariance(const StackCounters& c) const {
    return c.peak_epoch == peak_epoch_ ? c.variance_at_epoch_start : c.live_variance;
  }
  const std::vector<TimePoint>& timeline() const { return timeline_; }
  const std::vector<LineMemory>& lines() const { return lines_; }
  int64_t peak_events() const { return peak_events_; }
  int64_t invalid_events() const { return invalid_events_; }
  const transport::EventStager& stager() const { return stager_; }

 private:
  struct LiveBlock {
    uint32_t stack;
    int32_t line;  // index into lines_, -1 if no reported frame
    int64_t weight;
    double variance;  // its term of the stack's live_variance
  };

  transport::MpscRing* Events() const;
  void Process(const transport::MemoryEvent& ev, const transport::RawFrame* frames);
  int32_t AttributionLine(const std::vector<uint32_t>& frame_ids);
  void Touch(StackCounters& c) {
    if (c.peak_epoch != peak_epoch_) {
      c.live_at_epoch_start = c.live_bytes;
      c.variance_at_epoch_start = c.live_variance;
      c.peak_epoch = peak_epoch_;
    }
  }
  void Touch(LineMemory& l) {
    if (l.peak_epoch != peak_epoch_) {
      l.live_at_epoch_start = l.live_bytes;
      l.peak_epoch = peak_epoch_;
    }
    l.changed = true;
  }
  void AppendPoint(std::vector<TimePoint>* series, TimePoint p, size_t max_points, bool keep_extremes);

  StackTable* table_;
  python::CodeResolver* resolver_;
  ReportedFiles* reported_;
  Stitch stitch_;
  transport::MpscRing* const events_;  // nullptr: the allocation hooks' ring
  const int64_t start_ns_;
  uint64_t peak_epoch_ = 1;
  int64_t peak_events_ = 0;
  int64_t invalid_events_ = 0;
  std::unordered_map<uintptr_t, LiveBlock> live_blocks_;
  std::unordered_map<uint64_t, int32_t> line_index_;  // (file_id << 32 | lineno) -> lines_
  std::vector<LineMemory> lines_;
  std::vector<TimePoint> timeline_;
  std::vector<uint32_t> ids_;
  static constexpr size_t kMaxRecord =
      sizeof(transport::MemoryEvent) + transport::kMaxMemoryFrames * sizeof(transport::RawFrame);
  transport::EventStager stager_{kMaxRecord};
};

}  // namespace peakline::aggregate

#endif  // PEAKLINE_AGGREGATE_MEMORY_AGGREGATOR_H_
