// Runs a piece of Python source inside another CPython process (3.10-3.13) with nothing but
// ptrace permission: no debugger, no code written into the target's text. The attach command
// uses it to start peakline's in-process session in a process peakline did not start
// (docs/long-running.md, "Attach"; src/peakline/attach.py drives it).
//
// How (x86-64):
//  1. PTRACE_SEIZE the main thread and PTRACE_INTERRUPT it. Signals that arrive before the
//     stop are delivered as usual. At the stop all registers (general, and the whole XSAVE
//     area) and the signal mask are saved; the mask then blocks every standard signal, so
//     none is delivered on the borrowed thread while it runs our calls (synchronous faults
//     stay deliverable: a blocked SIGSEGV would reset the program's handler). Blocked
//     signals stay pending and arrive after the restore. Real-time signals keep the
//     program's mask: the session started in direct mode picks its sampling signal among
//     those the program does not block (a real-time signal of the program's own arriving
//     meanwhile runs its handler on the borrowed thread, as it could at any moment).
//  2. Functions of the target are called by setting the registers (System V ABI) to the
//     function's address, its arguments and a stack below the red zone whose return address
//     is 0: the return faults at address 0, which the tracer sees as a SIGSEGV stop, reads the
//     result in rax and suppresses the signal. orig_rax is set to -1 for these calls so the
//     kernel does not apply syscall-restart logic to them.
//  3. A page for the source text comes from the target's libc mmap(); the text is written with
//     process_vm_writev.
//  4. Where the code runs:
//     - kDirect: the thread was stopped inside a blocking system call that Python makes with
//       the GIL released (sleep, read, select/poll, futex, wait...) and PyGILState_Check()
//       says it does not hold the GIL. Then it holds no interpreter lock and no allocator
//       lock, and the code runs at once on that thread: PyGILState_Ensure,
//       PyRun_SimpleString(page), PyGILState_Release, munmap(page). A target blocked in
//       time.sleep() or input() is attached this way.
//     - kPendingCall: anywhere else (running bytecode, inside native code). Py_AddPendingCall
//       (PyRun_SimpleString, page) queues the code; the main thread runs it at its next
//       eval-breaker check, holding the GIL, between two bytecodes. Py_AddPendingCall takes
//       only the pending-calls lock, which the main thread holds for a few instructions while
//       it runs pending calls; none are queued in an ordinary program. The page stays mapped
//       until the code has run; the code releases it (peakline._attach_agent).
//  5. The saved registers, XSAVE area and mask are restored and the thread detached. A
//     system call that was interrupted by the stop is restarted by the kernel exactly as after
//     a signal that had no handler (its -ERESTART* result and orig_rax are restored with the
//     rest; the calls made meanwhile were not interrupted by a standard signal, all blocked,
//     so the thread's restart block is intact).
// The attaching thread blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT while the target is stopped:
// a tracer that died half-way would leave the target running our registers.
#ifndef PEAKLINE_ATTACH_PTRACE_INJECTOR_H_
#define PEAKLINE_ATTACH_PTRACE_INJECTOR_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "status/status.h"

namespace peakline::attach {

// What a target looks like before anything is injected (read-only: maps, ELF files, memory).
// Fails when the target is not a CPython process we can read.
struct TargetInfo {
  std::string python_object;   // the object that defines the C API (executable or libpython)
  // The target's Py_Version (PY_VERSION_HEX) on 3.11+; kPython310VersionHex for a 3.10 (known
  // by the symbols it defines: no Py_Version, but 3.10's PyAIter_Check); 0 when older.
  uint64_t version_hex = 0;
};
// 3.10.0 final: the micro version of a 3.10 target is not known (only major.minor count).
inline constexpr uint64_t kPython310VersionHex = 0x030A00F0;
Result<TargetInfo> ProbeTarget(pid_t pid);

struct Injection {
  std::string mode;      // "direct" or "pending-call"
  uint64_t page = 0;     // the page holding the code (still mapped in pending-call mode)
};
// Runs `code` in the target as described above. In `code`, the text kPagePlaceholder is
// replaced by the page's address (0x + 16 hex digits, the same length) in pending-call mode and by
// 0x0000000000000000 in direct mode, so
// the code knows whether it must release the page itself. `wait_ms` bounds each stop.
inline constexpr const char kPagePlaceholder[] = "__PEAKLINE_PAGE_X_";  // 18 characters
Result<Injection> InjectPython(pid_t pid, const std::string& code, int wait_ms);

// munmap in the calling process: the injected code releases its page with this. A failure
// carries munmap's errno value as its code.
Status ReleasePage(uint64_t address, uint64_t length);

}  // namespace peakline::attach

#endif  // PEAKLINE_ATTACH_PTRACE_INJECTOR_H_
