// ProcessMaps + ElfSymbols (attach/): the address they compute for a symbol of a loaded
// object must be where the dynamic linker put it, read from this very process.
#include "attach/process_maps.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "attach/elf_symbols.h"

namespace peakline::attach {
namespace {

std::string ObjectOf(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[4096];
  return realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
}

TEST(ProcessMapsTest, FindsLibcFunctionsWhereTheDynamicLinkerPutThem) {
  ProcessMaps maps;
  const Status loaded = maps.Load(getpid());
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  void* real_mmap = dlsym(RTLD_DEFAULT, "mmap");
  void* real_munmap = dlsym(RTLD_DEFAULT, "munmap");
  ASSERT_NE(real_mmap, nullptr);
  const std::string libc = ObjectOf(real_mmap);
  ASSERT_FALSE(libc.empty());
  std::string mapped;
  for (const std::string& path : maps.Objects()) {
    if (path == libc || BaseName(path) == BaseName(libc)) mapped = path;
  }
  ASSERT_FALSE(mapped.empty()) << libc << " not in /proc/self/maps";
  EXPECT_EQ(maps.SymbolAddress(mapped, "mmap"), reinterpret_cast<uint64_t>(real_mmap));
  EXPECT_EQ(maps.SymbolAddress(mapped, "munmap"), reinterpret_cast<uint64_t>(real_munmap));
  EXPECT_FALSE(maps.SymbolAddress(mapped, "no_such_symbol_anywhere").has_value());
}

TEST(ProcessMapsTest, NamesTheExecutable) {
  ProcessMaps maps;
  const Status loaded = maps.Load(getpid());
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(maps.executable(), std::string(exe, static_cast<size_t>(n)));
}

TEST(ProcessMapsTest, ReportsAProcessThatDoesNotExist) {
  ProcessMaps maps;
  const Status loaded = maps.Load(999999999);
  EXPECT_FALSE(loaded.ok());
  EXPECT_NE(loaded.message().find("/proc/999999999/maps"), std::string::npos) << loaded.message();
}

TEST(ElfSymbolsTest, RejectsAFileThatIsNotElf) {
  ElfSymbols elf;
  const Status opened = elf.Open("/proc/self/status");
  EXPECT_FALSE(opened.ok());
  EXPECT_FALSE(opened.message().empty());
}

}  // namespace
}  // namespace peakline::attach
