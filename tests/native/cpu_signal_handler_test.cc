// The CPU-timer signal handler (cpu/cpu_signal_handler.h) driven by a real per-thread CPU
// timer, with a fake StackCapture instead of the Python stack reader.
#include "cpu/cpu_signal_handler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu/clock.h"
#include "cpu/thread_cpu_timer.h"
#include "cpu/thread_slot.h"
#include "python/code_regions.h"
#include "transport/sample_record.h"
#include "transport/spsc_ring.h"

namespace peakline::cpu {

using python::CodeRegion;
using python::CodeRegionMap;
using transport::RawFrame;
using transport::SampleHeader;
using transport::SampleKind;
using transport::SpscRing;
using transport::kMaxRecordBytes;

namespace {

constexpr int64_t kIntervalNs = 10'000'000;  // 10 ms
const void* const kLeafCode = reinterpret_cast<const void*>(0x1000);
constexpr int32_t kLeafLasti = 7;

// Built before the handler is enabled; read (lock-free) in the signal handler.
CodeRegionMap g_test_binary;
std::atomic<int32_t> g_capture_calls{0};

// The fake capture: frame 0 is a constant, frame 1 carries the interrupted pc and a call
// sequence number; kind says whether the pc lies in this test binary (where the burn loop runs).
void FakeCapture(uintptr_t pc, RawFrame* frames, int max_frames, SampleHeader* header) {
  if (max_frames < 2) return;
  frames[0] = RawFrame{kLeafCode, kLeafLasti, 0};
  frames[1] = RawFrame{reinterpret_cast<const void*>(pc), g_capture_calls.fetch_add(1), 0};
  header->nframes = 2;
  header->kind = g_test_binary.Classify(pc) == CodeRegion::kNeutral ? SampleKind::kPython
                                                                      : SampleKind::kNative;
}

int64_t OwnCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return TimespecNs(ts);
}

// Mostly user-space arithmetic in this binary; the clock is read every few microseconds.
__attribute__((noinline)) void BurnCpuNs(int64_t ns) {
  const int64_t end = OwnCpuNs() + ns;
  volatile uint64_t sink = 0;
  while (OwnCpuNs() < end) {
    for (int i = 0; i < 20000; ++i) sink = sink * 6364136223846793005ULL + 1;
  }
}

// Keeps burning (in 1 ms slices) until the handler has recorded one more sample than `after`,
// so that the CPU time not yet covered by a record is small when the caller stops. Under CPU
// contention expiries are detected late (only at a scheduler tick that finds the thread
// running), so "stop after N ms" alone could leave several intervals uncovered.
void BurnUntilSampled(const ThreadSlot& slot, uint64_t after) {
  for (int i = 0; i < 3000 && slot.samples.load() <= after; ++i) BurnCpuNs(1'000'000);
}

// Burns at least min_ns, then on until the slot holds `want` samples (CPU cap 3 s). On a loaded
// machine the kernel detects CPU-timer expiries late and merges them into one signal
// (si_overrun), so a fixed CPU budget may yield few records.
template <typename Burn>
void BurnForSamples(const ThreadSlot& slot, uint64_t want, int64_t min_ns, Burn burn) {
  const int64_t start = OwnCpuNs();
  burn(min_ns);
  while (slot.samples.load() < want && OwnCpuNs() - start < 3'000'000'000) burn(2'000'000);
}

// Burns CPU mostly in the kernel (cheap syscalls), for system-time accounting.
void BurnSystemNs(int64_t ns) {
  const int64_t end = OwnCpuNs() + ns;
  char buf[1] = {0};
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  while (OwnCpuNs() < end) {
    for (int i = 0; i < 100; ++i) {
      (void)!write(fds[1], buf, 1);
      (void)!read(fds[0], buf, 1);
    }
  }
  close(fds[0]);
  close(fds[1]);
}

struct Record {
  SampleHeader header;
  std::vector<RawFrame> frames;
};

// Drains the ring; fails the test on a malformed record.
void Drain(SpscRing& ring, std::vector<Record>* out) {
  alignas(8) uint8_t buf[kMaxRecordBytes];
  for (;;) {
    const size_t n = ring.Read(buf, sizeof(buf));
    if (n == 0) return;
    ASSERT_NE(n, SIZE_MAX) << "record longer than kMaxRecordBytes";
    ASSERT_GE(n, sizeof(SampleHeader));
    Record r;
    std::memcpy(&r.header, buf, sizeof(SampleHeader));
    ASSERT_EQ(n, sizeof(SampleHeader) + r.header.nframes * sizeof(RawFrame));
    r.frames.resize(r.header.nframes);
    if (r.header.nframes > 0) {
      std::memcpy(r.frames.data(), buf + sizeof(SampleHeader), n - sizeof(SampleHeader));
    }
    out->push_back(std::move(r));
  }
}

class CpuSignalHandlerTest : public testing::Test {
 protected:
  void SetUp() override {
    if (g_test_binary.size() == 0) {
      ASSERT_TRUE(g_test_binary.AddObjectContaining(reinterpret_cast<const void*>(&BurnCpuNs),
                                                    CodeRegion::kNeutral));
    }
    ASSERT_TRUE(InstallCpuSignalHandler(CpuSamplingSignal(), FakeCapture).ok());
  }
  void TearDown() override {
    SetCpuSamplingEnabled(false);
    WaitForCpuHandlersIdle();
  }

  // Arms a timer for the calling thread on a freshly reset slot; returns the CPU time at arming.
  int64_t Arm(ThreadSlot* slot, timer_t* timer) {
    const pid_t tid = CurrentTid();
    slot->Reset(tid);
    slot->last_cpu_ns = ThreadCpuTimeNs(tid);
    const Status armed = ArmThreadCpuTimer(tid, CpuSamplingSignal(), CpuTickValue(slot),
                                           kIntervalNs, kIntervalNs, timer);
    EXPECT_TRUE(armed.ok()) << armed.message();
    return slot->last_cpu_ns;
  }

  // Stops sampling and returns the CPU time at the stop.
  int64_t Stop(timer_t timer) {
    const int64_t end = ThreadCpuTimeNs(CurrentTid());
    SetCpuSamplingEnabled(false);
    EXPECT_EQ(timer_delete(timer), 0);
    WaitForCpuHandlersIdle();
    return end;
  }
};

int64_t SumCpu(const std::vector<Record>& rs) {
  int64_t s = 0;
  for (const Record& r : rs) s += r.header.cpu_delta_ns;
  return s;
}

TEST_F(CpuSignalHandlerTest, RecordsCarryTheCapturedStackAndTheCpuTime) {
  static ThreadSlot slot(1 << 16);  // static: outlives any late signal
  timer_t timer;
  SetCpuSamplingEnabled(true);
  const int64_t start = Arm(&slot, &timer);
  BurnForSamples(slot, 20, 300'000'000, BurnCpuNs);
  BurnUntilSampled(slot, slot.samples.load());
  const int64_t end = Stop(timer);
  const int64_t burned = end - start;

  std::vector<Record> rs;
  Drain(slot.ring, &rs);
  // ~30 on an idle machine; BurnForSamples burned on until there were 20 (under contention
  // expiries detected at the same tick arrive as one signal, with si_overrun, and that
  // record's delta covers several intervals). Never more records than elapsed intervals.
  ASSERT_GE(rs.size(), 20u);
  EXPECT_LE(rs.size(), static_cast<size_t>(burned / kIntervalNs) + 1);
  EXPECT_EQ(slot.samples.load(), rs.size());
  EXPECT_EQ(slot.dropped.load(), 0u);

  int python = 0;
  int32_t prev_seq = -1;
  for (size_t i = 0; i < rs.size(); ++i) {
    const Record& r = rs[i];
    SCOPED_TRACE(testing::Message() << "record " << i);
    ASSERT_EQ(r.header.nframes, 2);
    EXPECT_EQ(r.frames[0].code, kLeafCode);
    EXPECT_EQ(r.frames[0].lasti, kLeafLasti);
    EXPECT_GT(r.frames[1].lasti, prev_seq);  // capture calls, in order
    prev_seq = r.frames[1].lasti;
    const auto pc = reinterpret_cast<uintptr_t>(r.frames[1].code);
    EXPECT_NE(pc, 0u);
    const bool in_binary = g_test_binary.Classify(pc) == CodeRegion::kNeutral;
    EXPECT_EQ(r.header.kind, in_binary ? SampleKind::kPython : SampleKind::kNative);
    python += in_binary;
    EXPECT_EQ(r.header.flags, 0);
    EXPECT_EQ(r.header.invalid_frames, 0);
    EXPECT_GT(r.header.cpu_delta_ns, 0);
    EXPECT_GE(r.header.system_delta_ns, 0);
    EXPECT_LE(r.header.system_delta_ns, r.header.cpu_delta_ns);
  }
  // The interrupted pc is where the thread really was: mostly the burn loop in this binary.
  EXPECT_GT(python, static_cast<int>(rs.size()) / 2);
  // The first record has no previous system time to diff against.
  EXPECT_EQ(rs[0].header.system_delta_ns, 0);
  // Deltas tile the CPU time since arming, up to the unsampled tail (~1 ms, see
  // BurnUntilSampled; the bound allows one interval + 10%).
  const int64_t sum = SumCpu(rs);
  EXPECT_LE(sum, burned);
  EXPECT_GE(sum, burned - kIntervalNs - burned / 10);
  // Detection lag makes single deltas vary, but the first one covers at least one interval
  // (a CPU timer never fires early).
  EXPECT_GE(rs[0].header.cpu_delta_ns, kIntervalNs);
}

TEST_F(CpuSignalHandlerTest, SystemTimeIsAttributed) {
  static ThreadSlot slot(1 << 16);
  timer_t timer;
  SetCpuSamplingEnabled(true);
  const int64_t start = Arm(&slot, &timer);
  BurnForSamples(slot, 20, 300'000'000, BurnSystemNs);
  BurnUntilSampled(slot, slot.samples.load());
  const int64_t burned = Stop(timer) - start;
  std::vector<Record> rs;
  Drain(slot.ring, &rs);
  ASSERT_GE(rs.size(), 20u);
  int64_t sys = 0;
  for (const Record& r : rs) {
    EXPECT_LE(r.header.system_delta_ns, r.header.cpu_delta_ns);
    sys += r.header.system_delta_ns;
  }
  // A write/read pipe loop spends most of its time in the kernel; rusage's stime is
  // tick-sampled, so only ask for a clear majority-independent lower bound of 20%.
  EXPECT_GT(sys, burned / 5) << "system " << sys / 1e6 << " ms of " << burned / 1e6 << " ms";
}

TEST_F(CpuSignalHandlerTest, FullRingDropsRecordsButNotCpuTime) {
  // 256 bytes hold 4 records of 4 + 24 + 32 = 60 bytes. We drain only after the ring has
  // dropped 3 more records, four times over (~12 of ~28 expiries dropped, ~120 ms of CPU,
  // far above the tolerance below); each dropped record's CPU time must carry over into the
  // next record that fits.
  static ThreadSlot slot(256);
  timer_t timer;
  std::vector<Record> rs;
  rs.reserve(256);
  SetCpuSamplingEnabled(true);
  const int64_t start = Arm(&slot, &timer);
  uint64_t drops_seen = 0;
  int overflows = 0;
  for (int slice = 0; slice < 3000 && overflows < 4; ++slice) {  // <= 3 s of CPU
    BurnCpuNs(2'000'000);
    const uint64_t d = slot.dropped.load();
    if (d >= drops_seen + 3) {
      drops_seen = d;
      ++overflows;
      Drain(slot.ring, &rs);  // the consumer runs on the producer's thread: still one of each
    }
  }
  ASSERT_EQ(overflows, 4) << "the tiny ring never overflowed";
  // Now the ring has room: the next record carries the time of the last drops.
  BurnUntilSampled(slot, slot.samples.load());
  const int64_t burned = Stop(timer) - start;
  Drain(slot.ring, &rs);

  const uint64_t dropped = slot.dropped.load();
  EXPECT_GE(dropped, 12u);
  EXPECT_EQ(slot.samples.load(), rs.size());
  EXPECT_LE(rs.size() + dropped, static_cast<size_t>(burned / kIntervalNs) + 1);
  int64_t max_delta = 0;
  for (const Record& r : rs) {
    ASSERT_EQ(r.header.nframes, 2);
    EXPECT_EQ(r.frames[0].code, kLeafCode);
    max_delta = std::max<int64_t>(max_delta, r.header.cpu_delta_ns);
  }
  // The record after 3 drops carries their time too: more than 3 intervals (the 4 expiries
  // involved are >= 1 interval apart and all come after the previous written record).
  EXPECT_GE(max_delta, 3 * kIntervalNs);
  const int64_t sum = SumCpu(rs);
  EXPECT_LE(sum, burned);
  EXPECT_GE(sum, burned - kIntervalNs - burned / 10)
      << "CPU time of dropped records was lost: " << sum / 1e6 << " of " << burned / 1e6 << " ms";
}

TEST_F(CpuSignalHandlerTest, DisabledSamplingWritesNothing) {
  static ThreadSlot slot(1 << 16);
  timer_t timer;
  SetCpuSamplingEnabled(false);
  const int calls_before = g_capture_calls.load();
  Arm(&slot, &timer);
  BurnCpuNs(100'000'000);  // ~10 expiries, all ignored
  Stop(timer);
  EXPECT_TRUE(slot.ring.Empty());
  EXPECT_EQ(slot.samples.load(), 0u);
  EXPECT_EQ(slot.dropped.load(), 0u);
  EXPECT_EQ(g_capture_calls.load(), calls_before);
}

// The program's own handler for the sampling signal (ProgramSignalAction): counts arrivals.
std::atomic<int> g_program_calls{0};
std::atomic<int> g_program_code{0};
std::atomic<void*> g_program_value{nullptr};
void ProgramHandler(int, siginfo_t* info, void*) {
  g_program_calls.fetch_add(1);
  g_program_code.store(info->si_code);
  g_program_value.store(info->si_value.sival_ptr);
}

void SetProgramAction(void (*handler)(int, siginfo_t*, void*), int flags = SA_SIGINFO) {
  struct sigaction act;
  std::memset(&act, 0, sizeof(act));
  act.sa_sigaction = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  ProgramSignalAction(&act, nullptr);
}

TEST_F(CpuSignalHandlerTest, SignalsThatAreNotOurTicksGoToTheProgramNotToTheRing) {
  // Someone else sending peakline's signal (here sigqueue, si_code SI_QUEUE) with a pointer
  // payload — even a slot's address — must not be taken for a sample; it is the program's.
  static ThreadSlot slot(1 << 16);
  slot.Reset(CurrentTid());
  SetProgramAction(ProgramHandler);
  g_program_calls = 0;
  SetCpuSamplingEnabled(true);
  sigval v;
  v.sival_ptr = &slot;
  ASSERT_EQ(sigqueue(getpid(), CpuSamplingSignal(), v), 0);
  // Delivered to some thread of the process; this test's process has only this one (gtest
  // starts no threads), so the handler has run by the time sigqueue returns (signal unblocked).
  usleep(10000);
  SetCpuSamplingEnabled(false);
  WaitForCpuHandlersIdle();
  EXPECT_TRUE(slot.ring.Empty());
  EXPECT_EQ(slot.samples.load(), 0u);
  EXPECT_EQ(g_program_calls.load(), 1);
  EXPECT_EQ(g_program_code.load(), SI_QUEUE);
  EXPECT_EQ(g_program_value.load(), &slot);
  EXPECT_EQ(GetCpuSignalStatus().forwarded, 1u);
}

TEST_F(CpuSignalHandlerTest, TicksNeverReachTheProgramAndItsOwnTimerDoes) {
#if defined(__SANITIZE_THREAD__)
  // TSan defers a signal to the thread's next intercepted call and keeps one pending signal
  // per number: during the burn loop the program's expiries and our ticks overwrite each other.
  GTEST_SKIP() << "TSan merges pending signals of one number";
#endif
  // The program handles the sampling signal and runs a CPU timer of its own on it, with a
  // payload of its own: its handler gets exactly its timer's expiries, the ring exactly ours.
  static ThreadSlot slot(1 << 20);
  timer_t ours;
  SetProgramAction(ProgramHandler);
  g_program_calls = 0;
  SetCpuSamplingEnabled(true);
  Arm(&slot, &ours);
  // Directed at this thread: a process-directed signal may go to a sanitizer runtime's own
  // thread, where TSan defers the handler indefinitely.
  sigevent sev;
  std::memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev._sigev_un._tid = CurrentTid();
  sev.sigev_signo = CpuSamplingSignal();
  static int program_payload;
  sev.sigev_value.sival_ptr = &program_payload;
  timer_t theirs;
  ASSERT_EQ(timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &theirs), 0);
  itimerspec spec{{0, 50'000'000}, {0, 50'000'000}};  // every 50 ms of CPU
  ASSERT_EQ(timer_settime(theirs, 0, &spec, nullptr), 0);
  BurnForSamples(slot, 20, 300'000'000, BurnCpuNs);
  ASSERT_EQ(timer_delete(theirs), 0);
  Stop(ours);
  EXPECT_GE(slot.samples.load(), 20u);
  const int program_calls = g_program_calls.load();
  EXPECT_GE(program_calls, 3);                                          // ~300 ms / 50 ms
  EXPECT_LE(static_cast<uint64_t>(program_calls), slot.samples.load() / 2);  // no tick among them
  EXPECT_EQ(g_program_code.load(), SI_TIMER);
  EXPECT_EQ(g_program_value.load(), &program_payload);
}

TEST_F(CpuSignalHandlerTest, ProgramDispositionIsReportedBackAndNeverApplied) {
  struct sigaction old;
  ProgramSignalAction(nullptr, &old);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(old.sa_handler), reinterpret_cast<uintptr_t>(SIG_DFL));
  SetProgramAction(ProgramHandler, SA_SIGINFO | SA_RESTART);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  ProgramSignalAction(&dfl, &old);
  EXPECT_EQ(old.sa_sigaction, &ProgramHandler);
  EXPECT_EQ(old.sa_flags, SA_SIGINFO | SA_RESTART);
  const CpuSignalStatus status = GetCpuSignalStatus();
  EXPECT_EQ(status.signo, CpuSamplingSignal());
  EXPECT_TRUE(status.handler_intact);
  EXPECT_TRUE(IsCpuSamplingSignal(CpuSamplingSignal()));
  EXPECT_FALSE(IsCpuSamplingSignal(SIGUSR1));
}

TEST_F(CpuSignalHandlerTest, IgnoredByTheProgramMeansNothingHappens) {
  struct sigaction ign;
  std::memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  ProgramSignalAction(&ign, nullptr);
  ASSERT_EQ(raise(CpuSamplingSignal()), 0);
  EXPECT_EQ(GetCpuSignalStatus().forwarded, 1u);
}

TEST_F(CpuSignalHandlerTest, DefaultDispositionKillsByTheSignalAsUnprofiled) {
  const int signo = CpuSamplingSignal();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the program's disposition is still SIG_DFL: die by the signal
    raise(signo);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), signo);
}

TEST_F(CpuSignalHandlerTest, ResetHandMeansOneCallThenDefault) {
  SetProgramAction(ProgramHandler, SA_SIGINFO | SA_RESETHAND);
  g_program_calls = 0;
  ASSERT_EQ(raise(CpuSamplingSignal()), 0);
  EXPECT_EQ(g_program_calls.load(), 1);
  struct sigaction now;
  ProgramSignalAction(nullptr, &now);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(now.sa_handler), reinterpret_cast<uintptr_t>(SIG_DFL));
}

TEST(CpuSamplingSignalTest, HighestFreeRealtimeSignalIsChosen) {
  if (IsCpuSamplingSignal(CpuSamplingSignal())) {
    GTEST_SKIP() << "handler installed by an earlier test";
  }
  EXPECT_EQ(CpuSamplingSignal(), SIGRTMAX);
  struct sigaction act, old;
  std::memset(&act, 0, sizeof(act));
  act.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGRTMAX, &act, &old), 0);  // taken by the program: ignored
  sigset_t block, before;
  sigemptyset(&block);
  sigaddset(&block, SIGRTMAX - 1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &before), 0);  // blocked: no tick would arrive
  EXPECT_EQ(CpuSamplingSignal(), SIGRTMAX - 2);
  ASSERT_TRUE(InstallCpuSignalHandler(SIGRTMAX - 2, FakeCapture).ok());
  EXPECT_EQ(CpuSamplingSignal(), SIGRTMAX - 2);  // fixed once installed
  EXPECT_EQ(InstallCpuSignalHandler(SIGRTMAX, FakeCapture).code(), EBUSY);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  sigaction(SIGRTMAX, &old, nullptr);
}

TEST_F(CpuSignalHandlerTest, CpuSamplingSignalIsARealtimeSignal) {
  EXPECT_GE(CpuSamplingSignal(), SIGRTMIN);
  EXPECT_LE(CpuSamplingSignal(), SIGRTMAX);
  // Installing again (e.g. a second profiling session) succeeds and keeps the handler.
  EXPECT_TRUE(InstallCpuSignalHandler(CpuSamplingSignal(), FakeCapture).ok());
  struct sigaction sa;
  ASSERT_EQ(sigaction(CpuSamplingSignal(), nullptr, &sa), 0);
  EXPECT_TRUE(sa.sa_flags & SA_SIGINFO);
  EXPECT_NE(reinterpret_cast<void*>(sa.sa_sigaction), nullptr);
}

}  // namespace
}  // namespace peakline::cpu

namespace peakline::cpu {
namespace {

// Detach (peakline attach): the program's recorded disposition goes back to the kernel, the
// signal is no longer peakline's, and a later session can install the handler again.
TEST_F(CpuSignalHandlerTest, ReleaseAppliesTheProgramsDispositionAndFreesTheSignal) {
  const int signo = CpuSamplingSignal();
  SetProgramAction(ProgramHandler, SA_SIGINFO | SA_RESTART);
  ASSERT_TRUE(ReleaseCpuSignalHandler(500).ok());
  struct sigaction now;
  ASSERT_EQ(sigaction(signo, nullptr, &now), 0);
  EXPECT_EQ(now.sa_sigaction, &ProgramHandler);
  EXPECT_FALSE(IsCpuSamplingSignal(signo));
  EXPECT_EQ(GetCpuSignalStatus().signo, -1);
  // The program's handler now gets the signal straight from the kernel.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(signo, &dfl, nullptr), 0);
  EXPECT_EQ(CpuSamplingSignal(), signo);  // free again: chosen afresh
  ASSERT_TRUE(InstallCpuSignalHandler(signo, FakeCapture).ok());
  EXPECT_TRUE(GetCpuSignalStatus().handler_intact);
}

TEST_F(CpuSignalHandlerTest, ReleaseRefusesWhileSamplingIsOn) {
  SetCpuSamplingEnabled(true);
  EXPECT_EQ(ReleaseCpuSignalHandler(0).code(), EBUSY);
  SetCpuSamplingEnabled(false);
  EXPECT_TRUE(IsCpuSamplingSignal(CpuSamplingSignal()));
}

}  // namespace
}  // namespace peakline::cpu
