// TimeBuckets: a bounded record of when a process used its CPU, and which line its main
// thread was on, over the run. It links the work of pool workers to the parent line that
// waited for it (merge: peakline/model/merge.py, "submitted work"; docs/distributed.md): a
// worker's CPU in an interval is charged to the line the parent's main thread was on then.
//
// A fixed number of buckets of equal width from the session's start; when time runs past
// the last one, neighbours are merged and the width doubles, so the size never grows with
// run time (1024 buckets of 20 ms cover 20 s; a 1-hour run ends with ~3.5 s buckets).
// Each bucket keeps its CPU sum and the main thread's line by a majority vote over the
// ticks that fell in it (Boyer-Moore: exact when one line has most of the bucket's ticks,
// an approximation otherwise; merging two buckets votes again).
//
// Not thread safe: the sampling session's (GIL held).
#ifndef PEAKLINE_AGGREGATE_TIME_BUCKETS_H_
#define PEAKLINE_AGGREGATE_TIME_BUCKETS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace peakline::aggregate {

class TimeBuckets {
 public:
  static constexpr int kBuckets = 1024;
  struct Bucket {
    int64_t cpu_ns = 0;
    uint32_t frame = 0;  // frame id + 1 of the main thread's innermost reported frame; 0: none
    int32_t votes = 0;
  };

  TimeBuckets(int64_t start_ns, int64_t width_ns)
      : start_ns_(start_ns), width_ns_(width_ns > 0 ? width_ns : 1), buckets_(kBuckets) {}

  void AddCpu(int64_t t_ns, int64_t cpu_ns) {
    if (Bucket* b = At(t_ns)) b->cpu_ns += cpu_ns;
  }
  // One tick's observation: the main thread was on frame id `frame_plus_one - 1` (0: on no
  // reported line).
  void NoteMainFrame(int64_t t_ns, uint32_t frame_plus_one) {
    if (Bucket* b = At(t_ns)) Vote(b, frame_plus_one, 1);
  }

  int64_t start_ns() const { return start_ns_; }
  int64_t width_ns() const { return width_ns_; }
  // Up to the last bucket that holds anything.
  std::vector<Bucket> Used() const {
    std::size_t n = buckets_.size();
    while (n > 0 && buckets_[n - 1].cpu_ns == 0 && buckets_[n - 1].votes == 0) --n;
    return std::vector<Bucket>(buckets_.begin(), buckets_.begin() + n);
  }

 private:
  Bucket* At(int64_t t_ns) {
    if (t_ns < start_ns_) return nullptr;
    int64_t i = (t_ns - start_ns_) / width_ns_;
    while (i >= kBuckets) {
      Coarsen();
      i = (t_ns - start_ns_) / width_ns_;
    }
    return &buckets_[static_cast<std::size_t>(i)];
  }
  void Coarsen() {
    for (int i = 0; i < kBuckets / 2; ++i) {
      Bucket merged = buckets_[2 * i];
      merged.cpu_ns += buckets_[2 * i + 1].cpu_ns;
      Vote(&merged, buckets_[2 * i + 1].frame, buckets_[2 * i + 1].votes);
      buckets_[i] = merged;
    }
    for (int i = kBuckets / 2; i < kBuckets; ++i) buckets_[i] = Bucket{};
    width_ns_ *= 2;
  }
  static void Vote(Bucket* b, uint32_t frame, int32_t votes) {
    if (votes <= 0) return;
    if (b->votes == 0 || b->frame == frame) {
      b->frame = frame;
      b->votes += votes;
    } else if (votes > b->votes) {
      b->frame = frame;
      b->votes = votes - b->votes;
    } else {
      b->votes -= votes;
    }
  }

  int64_t start_ns_;
  int64_t width_ns_;
  std::vector<Bucket> buckets_;
};

}  // namespace peakline::aggregate

#endif  // PEAKLINE_AGGREGATE_TIME_BUCKETS_H_
