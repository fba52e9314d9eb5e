// hooks::DlopenAsCaller: a bare library name is found through the *caller's* RUNPATH, as
// glibc would have done had the caller called dlopen itself.
#include "hooks/dlopen_search.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace peakline::hooks {
namespace {

constexpr const char* kPlugin = "libpeakline_dlplugin.so";

const void* CallerAnchor() {
  void* caller = dlopen(PEAKLINE_DLCALLER_PATH, RTLD_NOW);
  EXPECT_NE(caller, nullptr) << dlerror();
  return caller ? dlsym(caller, "peakline_caller_anchor") : nullptr;
}

TEST(DlopenSearchTest, PlainDlopenCannotFindThePluginByBareName) {
  EXPECT_EQ(dlopen(kPlugin, RTLD_NOW), nullptr);  // not on any default search path
}

TEST(DlopenSearchTest, BareNameIsResolvedWithTheCallersRunpath) {
  const void* anchor = CallerAnchor();
  ASSERT_NE(anchor, nullptr);
  void* handle = DlopenAsCaller(&dlopen, kPlugin, RTLD_NOW, anchor);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto value = reinterpret_cast<int (*)()>(dlsym(handle, "peakline_plugin_value"));
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value(), 42);
  // Once loaded, the bare name resolves to the same object (no second copy is loaded).
  void* again = DlopenAsCaller(&dlopen, kPlugin, RTLD_NOW, nullptr);
  EXPECT_EQ(again, handle);
}

TEST(DlopenSearchTest, WithoutCallerOrWithASlashItIsPlainDlopen) {
  EXPECT_EQ(DlopenAsCaller(&dlopen, kPlugin, RTLD_NOW, nullptr), nullptr);
  void* by_path = DlopenAsCaller(&dlopen, PEAKLINE_DLCALLER_PATH, RTLD_NOW, nullptr);
  EXPECT_NE(by_path, nullptr);
  EXPECT_NE(DlopenAsCaller(&dlopen, nullptr, RTLD_NOW, nullptr), nullptr);  // the main program
}

}  // namespace
}  // namespace peakline::hooks
