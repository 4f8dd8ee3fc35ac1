// Store URLs: what open_store() (store.h) accepts, parsed on their own so that callers
// (and tests) can check a URL without opening anything.
//
//   PG_ASSIGN_OR_RETURN(StoreUrl url, parse_store_url("tcp://[fe80::1]:29500"));
//   // url.kind == StoreUrl::kTcp, url.host == "fe80::1", url.port == 29500
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace procgroup::detail {

struct StoreUrl {
  enum Kind { kTcp, kFile, kMemory };
  Kind kind = kMemory;
  std::string host;  // tcp: a name, an IPv4 address or an IPv6 address (without brackets)
  int port = 0;      // tcp: 0..65535
  std::string path;  // file: absolute
};

// "tcp://host:port" (IPv6 in brackets), "file:///abs/path", "memory:". Anything else is
// PG_ERR_CONFIG naming the URL and what is wrong with it.
Result<StoreUrl> parse_store_url(std::string_view url);

}  // namespace procgroup::detail
