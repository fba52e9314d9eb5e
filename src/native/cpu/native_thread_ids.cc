#include "cpu/native_thread_ids.h"

#include <unordered_map>

namespace peakline::cpu {

#if PY_VERSION_HEX < 0x030B0000
namespace {
// pthread id -> kernel thread id. Guarded by the GIL. Leaked on purpose: it may be read by a
// session still alive at interpreter exit, after static destructors would have run.
[[maybe_unused]] std::unordered_map<unsigned long, pid_t>& Table() {  // used on 3.10 only
  static auto* table = new std::unordered_map<unsigned long, pid_t>();
  return *table;
}
}  // namespace
#endif

pid_t NativeThreadId(PyThreadState* ts) {
#if PY_VERSION_HEX >= 0x030B0000
  return static_cast<pid_t>(ts->native_thread_id);
#else
  const auto it = Table().find(ts->thread_id);
  return it == Table().end() ? 0 : it->second;
#endif
}

void RememberNativeThreadId(unsigned long ident, pid_t tid) {
#if PY_VERSION_HEX < 0x030B0000
  Table()[ident] = tid;
#else
  (void)ident, (void)tid;
#endif
}

}  // namespace peakline::cpu
