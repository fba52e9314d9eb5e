// ZeroedPages<T>: a fixed array of T in its own anonymous mapping, zero-filled by the kernel on
// first touch. For the hooks' big tables and rings (pointer table, mapping table, event ring):
//
// * Only the pages a program actually uses become resident. An array from new[] that is
//   cleared in a loop is resident in full from the start (that was 1.3 MiB of peakline's own
//   memory in every memory-mode run before a single allocation was sampled).
// * Reset() gives the pages back (MADV_DONTNEED: private anonymous pages read as zero again),
//   so a table is emptied between sessions without touching, let alone keeping, every page.
//
// The mapping is made with the raw system call, not mmap(): peakline's own allocation hooks
// interpose mmap in loaded objects, and this memory is peakline's, not the program's.
// T must be valid when all-zero bytes (integers, std::atomic of integers).
//
// Thread safety: Get() and operator[] from any thread; Reset() only while no thread uses the
// array (between profiling sessions).
#ifndef PEAKLINE_TRANSPORT_ZEROED_PAGES_H_
#define PEAKLINE_TRANSPORT_ZEROED_PAGES_H_

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <new>
#include <type_traits>

namespace peakline::transport {

template <typename T>
class ZeroedPages {
  static_assert(std::is_trivially_destructible_v<T>);

 public:
  explicit ZeroedPages(size_t count) : bytes_(RoundToPages(count * sizeof(T))) {
    long addr = syscall(SYS_mmap, nullptr, bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == -1) throw std::bad_alloc();  // at set-up only, never on a hot path
    data_ = reinterpret_cast<T*>(addr);
  }
  ~ZeroedPages() { syscall(SYS_munmap, data_, bytes_); }
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* get() { return data_; }
  const T* get() const { return data_; }

  // Every element zero again. Returns true when the pages were also given back; false when
  // the kernel refused and they were zeroed by hand (a plain byte loop: memset-family calls
  // may be interposed by peakline's own copy hooks elsewhere).
  bool Reset() {
    if (madvise(data_, bytes_, MADV_DONTNEED) == 0) return true;
    auto* bytes = reinterpret_cast<volatile unsigned char*>(data_);
    for (size_t i = 0; i < bytes_; ++i) bytes[i] = 0;
    return false;
  }

 private:
  static size_t RoundToPages(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return n == 0 ? page : (n + page - 1) / page * page;
  }

  size_t bytes_;
  T* data_ = nullptr;
};

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_ZEROED_PAGES_H_
