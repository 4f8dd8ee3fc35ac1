#include "loader/dl_library.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace procgroup::detail {
namespace {

// dlerror() returns NULL when there is nothing to report; messages must never be empty.
std::string take_dlerror() {
  const char* text = dlerror();
  return text != nullptr ? std::string(text) : std::string("unknown dl error");
}

}  // namespace

DlLibrary::~DlLibrary() { reset(); }

DlLibrary::DlLibrary(DlLibrary&& other) noexcept
    : handle_(other.release()), error_(std::move(other.error_)) {}

DlLibrary& DlLibrary::operator=(DlLibrary&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = other.release();
    error_ = std::move(other.error_);
  }
  return *this;
}

Result<DlLibrary> DlLibrary::open(const std::string& path) {
  dlerror();  // clear a stale message so the one we report belongs to this call
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return make_error(PG_ERR_BACKEND_NOT_FOUND, "dlopen: {}", take_dlerror());
  }
  return DlLibrary(handle);
}

void* DlLibrary::symbol(const char* name) {
  if (handle_ == nullptr) {
    error_ = "no library is open";
    return nullptr;
  }
  // A symbol's value may legitimately be NULL, so absence is told by dlerror(), not by
  // the return value alone.
  dlerror();
  void* address = dlsym(handle_, name);
  const char* text = dlerror();
  if (text != nullptr) {
    error_ = text;
    return nullptr;
  }
  if (address == nullptr) error_ = std::string(name) + " is NULL";
  return address;
}

void* DlLibrary::release() {
  void* handle = handle_;
  handle_ = nullptr;
  return handle;
}

void DlLibrary::reset() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
}

Result<std::string> canonical_file_path(const std::string& path) {
  // realpath(NULL-buffer) allocates exactly what it needs (POSIX.1-2008).
  std::unique_ptr<char, decltype(&free)> resolved(realpath(path.c_str(), nullptr), &free);
  if (resolved == nullptr) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return make_error(PG_ERR_BACKEND_NOT_FOUND, "no such file");
    }
    return make_error(PG_ERR_BACKEND_NOT_FOUND, "{}", std::strerror(error));
  }
  return std::string(resolved.get());
}

std::string file_containing(const void* address) {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0) return {};
  // For the main executable glibc reports argv[0], which may be relative or lack a
  // directory altogether; /proc/self/exe names it exactly.
  if (map != nullptr && map->l_name != nullptr && map->l_name[0] == '\0') {
    char buffer[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
    if (n <= 0) return {};
    return std::string(buffer, static_cast<size_t>(n));
  }
  if (info.dli_fname == nullptr) return {};
  // Canonical: a library found through a relative LD_LIBRARY_PATH entry has a relative
  // name, and through a symlink the real directory is where procgroup/ was installed.
  Result<std::string> canonical = canonical_file_path(info.dli_fname);
  return canonical.ok() ? canonical.value() : std::string(info.dli_fname);
}

}  // namespace procgroup::detail
