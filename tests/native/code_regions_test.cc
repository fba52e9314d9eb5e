// CodeRegionMap (python/code_regions.h): classifying interrupted PCs by loaded object/symbol.
#include "python/code_regions.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include <cstdint>
#include <string>

namespace peakline::python {
namespace {

__attribute__((noinline)) int LocalFunction(int x) { return x * 3 + 1; }

extern "C" {
__attribute__((noinline, used)) static int peakline_test_static_function(int x) {
  return x * 5 + 2;
}
}

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// A plain (non-IFUNC) function exported by libc. strlen and libm's cos are IFUNCs on x86-64:
// &strlen is the selected variant (__strlen_avx2, ...), which is not in the dynamic symbol
// table, so dladdr cannot size it. qsort has a real dynamic symbol with st_size.
const void* LibcPlainFunction() { return reinterpret_cast<const void*>(&qsort); }

TEST(CodeRegionsTest, EmptyMapClassifiesEverythingAsOther) {
  CodeRegionMap map;
  EXPECT_EQ(map.size(), 0);
  EXPECT_EQ(map.Classify(0), CodeRegion::kOther);
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&strlen))), CodeRegion::kOther);
}

TEST(CodeRegionsTest, ObjectContainingLibcFunction) {
  CodeRegionMap map;
  ASSERT_TRUE(map.AddObjectContaining(reinterpret_cast<const void*>(&strlen),
                                      CodeRegion::kNeutral));
  EXPECT_GE(map.size(), 1);
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&strlen))), CodeRegion::kNeutral);
  EXPECT_EQ(map.Classify(Addr(LibcPlainFunction())), CodeRegion::kNeutral);  // same object
  // Code of the test binary is another object.
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&LocalFunction))),
            CodeRegion::kOther);
  EXPECT_EQ(map.Classify(0), CodeRegion::kOther);
}

TEST(CodeRegionsTest, ObjectContainingTestBinaryCoversOnlyExecutableSegments) {
  CodeRegionMap map;
  ASSERT_TRUE(map.AddObjectContaining(reinterpret_cast<const void*>(&LocalFunction),
                                      CodeRegion::kInterpreter));
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&LocalFunction))),
            CodeRegion::kInterpreter);
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&strlen))), CodeRegion::kOther);
  static const char kReadOnly[] = "read-only data of the test binary";
  static int writable = 1;
  (void)kReadOnly;
  // Data segments of the object are not code: the object lookup uses all loaded segments,
  // but only executable ones become ranges.
  EXPECT_EQ(map.Classify(Addr(&writable)), CodeRegion::kOther);
}

TEST(CodeRegionsTest, AddressInNoObjectIsRejected) {
  CodeRegionMap map;
  int on_stack = 0;
  EXPECT_FALSE(map.AddObjectContaining(&on_stack, CodeRegion::kNeutral));
  EXPECT_FALSE(map.AddObjectContaining(nullptr, CodeRegion::kNeutral));
  EXPECT_EQ(map.size(), 0);
}

TEST(CodeRegionsTest, SymbolContainingCoversExactlyTheFunction) {
  const void* fn = LibcPlainFunction();
  Dl_info info;
  void* extra = nullptr;
  ASSERT_NE(dladdr1(fn, &info, &extra, RTLD_DL_SYMENT), 0);
  ASSERT_NE(info.dli_sname, nullptr);
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  ASSERT_NE(sym, nullptr);
  const uintptr_t lo = Addr(info.dli_saddr);
  const uintptr_t hi = lo + sym->st_size;
  ASSERT_GT(hi, lo);

  CodeRegionMap map;
  ASSERT_TRUE(map.AddSymbolContaining(fn, CodeRegion::kEvalLoop)) << info.dli_sname;
  EXPECT_EQ(map.size(), 1);
  EXPECT_EQ(map.Classify(lo), CodeRegion::kEvalLoop);
  EXPECT_EQ(map.Classify(hi - 1), CodeRegion::kEvalLoop);
  EXPECT_EQ(map.Classify(hi), CodeRegion::kOther);
  EXPECT_EQ(map.Classify(lo - 1), CodeRegion::kOther);
  EXPECT_EQ(map.Classify(hi + 4096), CodeRegion::kOther);
  EXPECT_EQ(map.Classify(0), CodeRegion::kOther);

  // An address inside the function (not its start) finds the same symbol.
  CodeRegionMap map2;
  ASSERT_TRUE(map2.AddSymbolContaining(reinterpret_cast<const void*>(lo + 1),
                                       CodeRegion::kInterpreter));
  EXPECT_EQ(map2.Classify(lo), CodeRegion::kInterpreter);
  EXPECT_EQ(map2.Classify(hi), CodeRegion::kOther);
}

TEST(CodeRegionsTest, SymbolContainingRejectsNonCode) {
  CodeRegionMap map;
  int on_stack = 0;
  EXPECT_FALSE(map.AddSymbolContaining(&on_stack, CodeRegion::kEvalLoop));
  EXPECT_EQ(map.size(), 0);
}

TEST(CodeRegionsTest, FirstAddedRangeWinsOnOverlap) {
  CodeRegionMap map;
  map.AddRange(100, 200, CodeRegion::kEvalLoop);
  map.AddRange(50, 300, CodeRegion::kInterpreter);
  EXPECT_EQ(map.Classify(49), CodeRegion::kOther);
  EXPECT_EQ(map.Classify(50), CodeRegion::kInterpreter);
  EXPECT_EQ(map.Classify(99), CodeRegion::kInterpreter);
  EXPECT_EQ(map.Classify(100), CodeRegion::kEvalLoop);
  EXPECT_EQ(map.Classify(199), CodeRegion::kEvalLoop);
  EXPECT_EQ(map.Classify(200), CodeRegion::kInterpreter);
  EXPECT_EQ(map.Classify(299), CodeRegion::kInterpreter);
  EXPECT_EQ(map.Classify(300), CodeRegion::kOther);

  // The same with real objects: the eval-loop symbol first, then its whole object.
  CodeRegionMap real;
  const void* fn = LibcPlainFunction();
  ASSERT_TRUE(real.AddSymbolContaining(fn, CodeRegion::kEvalLoop));
  ASSERT_TRUE(real.AddObjectContaining(fn, CodeRegion::kInterpreter));
  EXPECT_EQ(real.Classify(Addr(fn)), CodeRegion::kEvalLoop);
  EXPECT_EQ(real.Classify(Addr(reinterpret_cast<const void*>(&strlen))),
            CodeRegion::kInterpreter);
}

// The dynamic linker: a shared libpython's thread-local reads go through __tls_get_addr, which
// must not count as native time (it was 8% of a pure-Python loop on 3.12).
TEST(CodeRegionsTest, ObjectDefiningFindsTheDynamicLinker) {
  CodeRegionMap map;
  const void* tls = dlsym(RTLD_DEFAULT, "__tls_get_addr");
  ASSERT_NE(tls, nullptr);
  ASSERT_TRUE(map.AddObjectDefining("__tls_get_addr", CodeRegion::kNeutral));
  EXPECT_EQ(map.Classify(Addr(tls)), CodeRegion::kNeutral);
  // Only that object: this test binary stays unclassified. (Not checked against libc: under
  // ASan/TSan both __tls_get_addr and qsort resolve to the sanitizer runtime's interceptors.)
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&LocalFunction))), CodeRegion::kOther);
  // Adding it again (or through another of its symbols) adds no range.
  const int n = map.size();
  EXPECT_TRUE(map.AddObjectDefining("__tls_get_addr", CodeRegion::kNeutral));
  EXPECT_EQ(map.size(), n);
}

TEST(CodeRegionsTest, ObjectDefiningAnUnknownSymbolAddsNothing) {
  CodeRegionMap map;
  EXPECT_FALSE(map.AddObjectDefining("peakline_no_such_symbol_anywhere", CodeRegion::kNeutral));
  EXPECT_EQ(map.size(), 0);
}

TEST(CodeRegionsTest, VdsoCoversClockGettime) {
  CodeRegionMap map;
  const unsigned long base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) GTEST_SKIP() << "no vDSO on this kernel";
  ASSERT_TRUE(map.AddVdso(CodeRegion::kNeutral));
  EXPECT_EQ(map.Classify(base + 16), CodeRegion::kNeutral);  // inside its text mapping
  EXPECT_EQ(map.Classify(Addr(LibcPlainFunction())), CodeRegion::kOther);
}

TEST(CodeRegionsTest, EmptyRangesAndOverflowAreIgnored) {
  CodeRegionMap map;
  map.AddRange(10, 10, CodeRegion::kEvalLoop);
  map.AddRange(20, 10, CodeRegion::kEvalLoop);
  EXPECT_EQ(map.size(), 0);
  EXPECT_EQ(map.Classify(10), CodeRegion::kOther);
  for (int i = 0; i < CodeRegionMap::kMaxRanges + 5; ++i) {
    map.AddRange(1000 * (i + 1), 1000 * (i + 1) + 10, CodeRegion::kNeutral);
  }
  EXPECT_EQ(map.size(), CodeRegionMap::kMaxRanges);
  EXPECT_EQ(map.Classify(1000 * CodeRegionMap::kMaxRanges), CodeRegion::kNeutral);
  EXPECT_EQ(map.Classify(1000 * (CodeRegionMap::kMaxRanges + 1)), CodeRegion::kOther);
}

TEST(CodeRegionsTest, FileSymbolsFindStaticFunctionsByName) {
  // A static function has no dynamic symbol (dladdr cannot see it): only the file's .symtab
  // names it, as CPython 3.10's frame_dealloc. The test binary is built unstripped.
  const char* names[] = {"peakline_test_static_function", "peakline_no_such_function"};
  CodeRegionMap map;
  EXPECT_EQ(map.AddFileSymbols(reinterpret_cast<const void*>(&peakline_test_static_function),
                               names, 2, CodeRegion::kEvalLoop),
            1);
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&peakline_test_static_function))),
            CodeRegion::kEvalLoop);
  EXPECT_EQ(map.Classify(Addr(reinterpret_cast<const void*>(&LocalFunction))), CodeRegion::kOther);
  EXPECT_EQ(peakline_test_static_function(1), 7);
}

TEST(CodeRegionsTest, FileSymbolsOfAnAddressInNoObjectAddNothing) {
  const char* names[] = {"qsort"};
  CodeRegionMap map;
  EXPECT_EQ(map.AddFileSymbols(reinterpret_cast<const void*>(16), names, 1, CodeRegion::kEvalLoop),
            0);
  EXPECT_EQ(map.size(), 0);
}

}  // namespace
}  // namespace peakline::python
