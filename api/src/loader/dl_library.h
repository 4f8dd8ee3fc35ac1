// DlLibrary: an owned dlopen() handle (dlclose'd on destruction) and the few dl* calls the
// loader needs, with dlerror() text captured at the failing call so messages say why.
//
//   PG_ASSIGN_OR_RETURN(DlLibrary lib, DlLibrary::open("/x/libprocgroup-gloo.so"));
//   void* fn = lib.symbol(PG_BACKEND_NEGOTIATE_SYMBOL);  // nullptr when absent
#pragma once

#include <string>

#include "common/status.h"

namespace procgroup::detail {

class DlLibrary {
 public:
  DlLibrary() = default;
  ~DlLibrary();
  DlLibrary(DlLibrary&& other) noexcept;
  DlLibrary& operator=(DlLibrary&& other) noexcept;
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;

  // dlopen(path, RTLD_NOW | RTLD_LOCAL): every undefined symbol is resolved now, so a
  // plugin built against a missing library fails here with a message, not at its first
  // call; LOCAL keeps one plugin's symbols from satisfying another's. On failure the
  // status is PG_ERR_BACKEND_NOT_FOUND with "dlopen: <dlerror text>".
  static Result<DlLibrary> open(const std::string& path);

  // The address of an exported symbol, or nullptr (with error() set) when it is absent.
  void* symbol(const char* name);
  // dlerror() text of the last failed symbol() call.
  const std::string& error() const { return error_; }

  void* handle() const { return handle_; }
  // Gives up ownership: the caller must dlclose the returned handle.
  void* release();

 private:
  explicit DlLibrary(void* handle) : handle_(handle) {}
  void reset();

  void* handle_ = nullptr;
  std::string error_;
};

// The canonical absolute path of an existing file (realpath), or an error saying why not
// ("no such file", "permission denied", ...) with PG_ERR_BACKEND_NOT_FOUND.
Result<std::string> canonical_file_path(const std::string& path);

// The file that holds the code at address (dladdr): libprocgroup.so when the loader is
// linked into it, the executable when linked statically. Empty when unknown.
std::string file_containing(const void* address);

}  // namespace procgroup::detail
