#include "aggregate/stack_table.h"

namespace peakline::aggregate {

namespace {
inline size_t Mix(size_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}
}  // namespace

size_t StackTable::FrameHash::operator()(const FrameKey& k) const {
  size_t h = Mix(0, k.file_id);
  h = Mix(h, k.function_id);
  h = Mix(h, static_cast<uint32_t>(k.first_lineno));
  return Mix(h, static_cast<uint32_t>(k.lineno));
}

size_t StackTable::StackKeyHash::operator()(const std::pair<pid_t, std::vector<uint32_t>>& k) const {
  size_t h = Mix(0, static_cast<uint32_t>(k.first));
  for (uint32_t f : k.second) h = Mix(h, f);
  return h;
}

uint32_t StackTable::InternString(std::string_view s) {
  auto it = string_ids_.find(std::string(s));
  if (it != string_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  string_ids_.emplace(strings_.back(), id);
  return id;
}

uint32_t StackTable::InternFrame(const FrameKey& key) {
  auto it = frame_ids_.find(key);
  if (it != frame_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(frames_.size());
  frames_.push_back(key);
  frame_ids_.emplace(key, id);
  return id;
}

uint32_t StackTable::StackIndex(pid_t tid, const uint32_t* frames, size_t n) {
  probe_.first = tid;
  probe_.second.assign(frames, frames + n);
  auto it = stack_ids_.find(probe_);
  if (it != stack_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back(StackRow{tid, probe_.second, StackCounters{}});
  stack_ids_.emplace(probe_, id);
  return id;
}

}  // namespace peakline::aggregate
