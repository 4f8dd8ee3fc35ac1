// Store URLs: what open_store() (store.h) accepts, parsed on their own so that callers
// (and tests) can check a URL without opening anything.
//
//   PG_ASSIGN_OR_RETURN(StoreUrl url, parse_store_url("tcp://[fe80::1]:29500"));
//   // url.kind == StoreUrl::kTcp, url.host == "fe80::1", url.port == 29500
//   PG_ASSIGN_OR_RETURN(url, parse_store_url("c10d://node0:29500/procgroup/attempt_1/?agent"));
//   // url.kind == StoreUrl::kC10d, url.key_prefix == "procgroup/attempt_1/", url.agent
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace procgroup::detail {

struct StoreUrl {
  enum Kind { kTcp, kC10d, kFile, kMemory };
  Kind kind = kMemory;
  std::string host;        // tcp, c10d: a name, an IPv4 or an IPv6 address (no brackets)
  int port = 0;            // tcp: 0..65535; c10d: 1..65535
  std::string path;        // file: absolute
  std::string key_prefix;  // c10d: where our keys live in torch's key space
  bool agent = false;      // c10d: it is torchrun's agent store (says so in messages)
};

// "tcp://host:port" (IPv6 in brackets), "file:///abs/path", "memory:", and
// "c10d://host:port[/key/prefix/][?agent]": a torch c10d TCPStore that someone else hosts
// (torchrun's agent under its default launch), our keys under key/prefix/ ("procgroup/" if
// none). Anything else is PG_ERR_CONFIG naming the URL and what is wrong with it.
Result<StoreUrl> parse_store_url(std::string_view url);

}  // namespace procgroup::detail
