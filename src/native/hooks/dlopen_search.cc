#include "hooks/dlopen_search.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace peakline::hooks {

namespace {

// The caller object's RUNPATH (or RPATH when it has no RUNPATH), "" if none.
std::string SearchPathOf(const link_map* lm) {
  const char* strtab = nullptr;
  const ElfW(Dyn)* runpath = nullptr;
  const ElfW(Dyn)* rpath = nullptr;
  for (const ElfW(Dyn)* d = lm->l_ld; d != nullptr && d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
    if (d->d_tag == DT_RUNPATH) runpath = d;
    if (d->d_tag == DT_RPATH) rpath = d;
  }
  const ElfW(Dyn)* entry = runpath != nullptr ? runpath : rpath;
  if (strtab == nullptr || entry == nullptr) return "";
  return strtab + entry->d_un.d_val;
}

std::string OriginOf(const link_map* lm) {
  std::string path = (lm->l_name != nullptr && lm->l_name[0] != '\0') ? lm->l_name : "";
  if (path.empty()) {  // the main program
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return "";
    path.assign(buf, static_cast<size_t>(n));
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string ExpandOrigin(std::string dir, const std::string& origin) {
  for (const char* token : {"${ORIGIN}", "$ORIGIN"}) {
    for (size_t at = dir.find(token); at != std::string::npos; at = dir.find(token)) {
      dir.replace(at, std::strlen(token), origin);
    }
  }
  return dir;
}

}  // namespace

void* DlopenAsCaller(DlopenFn real_dlopen, const char* file, int flags, const void* caller) {
  if (file == nullptr || std::strchr(file, '/') != nullptr) return real_dlopen(file, flags);
  if (void* loaded = real_dlopen(file, flags | RTLD_NOLOAD)) return loaded;
  Dl_info info;
  link_map* lm = nullptr;
  if (caller != nullptr &&
      dladdr1(caller, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) != 0 && lm != nullptr) {
    const std::string path = SearchPathOf(lm);
    if (!path.empty()) {
      const std::string origin = OriginOf(lm);
      size_t start = 0;
      while (start <= path.size()) {
        size_t end = path.find(':', start);
        if (end == std::string::npos) end = path.size();
        const std::string dir = ExpandOrigin(path.substr(start, end - start), origin);
        if (!dir.empty()) {
          const std::string candidate = dir + "/" + file;
          if (access(candidate.c_str(), F_OK) == 0) {
            if (void* handle = real_dlopen(candidate.c_str(), flags)) return handle;
          }
        }
        start = end + 1;
      }
    }
  }
  return real_dlopen(file, flags);
}

}  // namespace peakline::hooks
