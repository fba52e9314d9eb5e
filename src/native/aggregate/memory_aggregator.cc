#include "aggregate/memory_aggregator.h"

#include <algorithm>
#include <cstring>

#include "hooks/allocation_hooks.h"
#include "python/python_frames.h"

namespace peakline::aggregate {

using python::CodeResolver;
using python::kForeignFrame;
using transport::RawFrame;

namespace {
constexpr size_t kMaxGlobalPoints = 2048;
constexpr size_t kMaxLinePoints = 64;
}  // namespace

MemoryAggregator::MemoryAggregator(StackTable* table, CodeResolver* resolver,
                                   ReportedFiles* reported, int64_t start_ns, Stitch stitch,
                                   transport::MpscRing* events)
    : table_(table), resolver_(resolver), reported_(reported), stitch_(std::move(stitch)),
      events_(events), start_ns_(start_ns) {
  timeline_.push_back(TimePoint{0, 0});
}

transport::MpscRing* MemoryAggregator::Events() const {
  return events_ != nullptr ? events_ : hooks::MemoryEventRing();
}

void MemoryAggregator::StartStaging() {
  stager_.Start(Events(), hooks::MarkCurrentThreadInternal);
}

void MemoryAggregator::Drain() {
  // Staged records are drained even when the ring is gone (a fork child forgets it).
  stager_.Drain(Events(), [this](const uint8_t* record, size_t n) {
    transport::MemoryEvent ev;
    if (n == SIZE_MAX || n < sizeof(ev)) {
      ++invalid_events_;
      return;
    }
    std::memcpy(&ev, record, sizeof(ev));
    if (sizeof(ev) + ev.nframes * sizeof(RawFrame) != n) {
      ++invalid_events_;
      return;
    }
    // The frames follow the event at an 8-byte aligned offset (sizeof(ev) is a multiple of 8).
    Process(ev, reinterpret_cast<const RawFrame*>(record + sizeof(ev)));
  });
}

void MemoryAggregator::Process(const transport::MemoryEvent& ev, const RawFrame* frames) {
  using transport::MemoryEventType;
  switch (ev.type) {
    case MemoryEventType::kPeak:
      ++peak_epoch_;
      ++peak_events_;
      return;
    case MemoryEventType::kFree: {
      auto it = live_blocks_.find(ev.address);
      if (it == live_blocks_.end()) return;
      StackCounters& c = table_->counters(it->second.stack);
      Touch(c);
      c.free_bytes += it->second.weight;
      c.live_bytes -= it->second.weight;
      c.live_variance -= it->second.variance;
      if (c.live_variance < 0) c.live_variance = 0;  // rounding: a sum of removed terms
      if (it->second.line >= 0) {
        LineMemory& l = lines_[it->second.line];
        Touch(l);
        l.live_bytes -= it->second.weight;
        l.changed_at_ns = ev.time_ns;
      }
      live_blocks_.erase(it);
      return;
    }
    case MemoryEventType::kAlloc:
    case MemoryEventType::kCopy:
      break;
    default:
      ++invalid_events_;
      return;
  }
  ids_.clear();
  // The thread's own frames, then (another thread's event) the main thread's at that moment.
  int n_own = 0;
  while (n_own < ev.nframes && frames[n_own].reserved != kForeignFrame) ++n_own;
  for (int i = 0; i < n_own; ++i) {
    if (resolver_->IsDead(frames[i].code)) {
      ++invalid_events_;
      continue;
    }
    ids_.push_back(resolver_->Resolve(const_cast<PyObject*>(static_cast<const PyObject*>(frames[i].code)),
                                      frames[i].lasti));
  }
  if (stitch_) stitch_(ev.tid, &ids_, frames + n_own, ev.nframes - n_own);
  const uint32_t stack = table_->StackIndex(ev.tid, ids_.data(), ids_.size());
  StackCounters& c = table_->counters(stack);
  if (ev.type == transport::MemoryEventType::kCopy) {
    c.copy_bytes += ev.weight;
    return;
  }
  // A block we still think live at this address was freed unseen (e.g. inside libc):
  // forget it without charging a free.
  live_blocks_.erase(ev.address);
  Touch(c);
  if (ev.domain == transport::kDomainPython) {
    c.alloc_python_bytes += ev.weight;
  } else {
    c.alloc_native_bytes += ev.weight;
  }
  c.live_bytes += ev.weight;
  // Horvitz-Thompson: a block of s bytes sampled with p = s / w contributes w^2 (1 - p) =
  // w (w - s) to the estimate's variance (0 when s >> T: such blocks are counted exactly).
  const double variance = static_cast<double>(ev.weight) *
                          static_cast<double>(ev.weight > ev.size ? ev.weight - ev.size : 0);
  c.live_variance += variance;
  ++c.alloc_samples;
  const int32_t line = AttributionLine(ids_);
  if (line >= 0) {
    LineMemory& l = lines_[line];
    Touch(l);
    l.live_bytes += ev.weight;
    l.changed_at_ns = ev.time_ns;
  }
  live_blocks_.emplace(ev.address, LiveBlock{stack, line, ev.weight, variance});
}

int32_t MemoryAggregator::AttributionLine(const std::vector<uint32_t>& frame_ids) {
  for (uint32_t id : frame_ids) {  // leaf first: the innermost reported frame wins
    // A copy: Reported() may call Python, and the tables must not be referenced across it.
    const FrameKey f = table_->frames()[id];
    if (!reported_->Reported(f.file_id)) continue;
    const uint64_t key = (static_cast<uint64_t>(f.file_id) << 32) | static_cast<uint32_t>(f.lineno);
    auto it = line_index_.find(key);
    if (it != line_index_.end()) return it->second;
    const auto index = static_cast<int32_t>(lines_.size());
    LineMemory l;
    l.file_id = f.file_id;
    l.lineno = f.lineno;
    l.peak_epoch = peak_epoch_;  // new: its value before this epoch's first change was 0
    lines_.push_back(std::move(l));
    line_index_.emplace(key, index);
    return index;
  }
  return -1;
}

void MemoryAggregator::OnTick(int64_t now_ns) {
  memory::HeapCounters& heap = hooks::Heap();
  // The extremes since the last tick, in the order they happened, then the current value.
  const int64_t live = heap.live.load(std::memory_order_relaxed);
  const int64_t max_v = heap.window_max.exchange(live, std::memory_order_relaxed);
  const int64_t max_t = heap.window_max_time_ns.load(std::memory_order_relaxed);
  const int64_t min_v = heap.window_min.exchange(live, std::memory_order_relaxed);
  const int64_t min_t = heap.window_min_time_ns.load(std::memory_order_relaxed);
  TimePoint a{max_t - start_ns_, max_v}, b{min_t - start_ns_, min_v};
  if (a.t_ns > b.t_ns) std::swap(a, b);
  const int64_t last_t = timeline_.back().t_ns;
  for (TimePoint p : {a, b}) {
    if (p.t_ns > last_t && p.t_ns <= now_ns - start_ns_ && p.bytes != timeline_.back().bytes) {
      AppendPoint(&timeline_, p, kMaxGlobalPoints, true);
    }
  }
  AppendPoint(&timeline_, TimePoint{now_ns - start_ns_, live}, kMaxGlobalPoints, true);
  // A line's point is stamped when its last change in this window happened, not at this
  // tick: a C call holding the GIL (a 256 MiB bytearray being zeroed) delays the tick by
  // up to seconds, and the chart's hover reads these points against the exact timeline.
  for (LineMemory& l : lines_) {
    if (!l.changed) continue;
    l.changed = false;
    int64_t t = now_ns - start_ns_;
    const int64_t floor = l.timeline.empty() ? 0 : l.timeline.back().t_ns;
    if (l.changed_at_ns > 0 && l.changed_at_ns - start_ns_ < t) {
      t = std::max(floor, l.changed_at_ns - start_ns_);
    }
    AppendPoint(&l.timeline, TimePoint{t, l.live_bytes}, kMaxLinePoints, false);
  }
}

void MemoryAggregator::AppendPoint(std::vector<TimePoint>* series, TimePoint p, size_t max_points,
                                   bool keep_extremes) {
  series->push_back(p);
  if (series->size() <= max_points) return;
  // Halve. The global timeline keeps the min and the max of every 4 points (in time order),
  // so spikes and dips survive; per-line series keep every other point (the later one).
  std::vector<TimePoint> out;
  out.reserve(max_points / 2 + 2);
  const std::vector<TimePoint>& s = *series;
  if (keep_extremes) {
    out.push_back(s.front());
    size_t i = 1;
    for (; i + 4 <= s.size() - 1; i += 4) {
      size_t lo = i, hi = i;
      for (size_t j = i; j < i + 4; ++j) {
        if (s[j].bytes < s[lo].bytes) lo = j;
        if (s[j].bytes > s[hi].bytes) hi = j;
      }
      out.push_back(s[lo < hi ? lo : hi]);
      if (lo != hi) out.push_back(s[lo < hi ? hi : lo]);
    }
    for (; i < s.size(); ++i) out.push_back(s[i]);
  } else {
    for (size_t i = 1; i < s.size(); i += 2) out.push_back(s[i]);
    if (out.back().t_ns != s.back().t_ns) out.push_back(s.back());
  }
  *series = std::move(out);
}

}  // namespace peakline::aggregate
