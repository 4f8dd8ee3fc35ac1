// open_store(): URL parsing and the factory behind store.h.
#include "store/open_store.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "store/c10d_store_client.h"
#include "store/file_store.h"
#include "store/store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace procgroup::detail {
namespace {

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

bool ipv6_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.' || c == '%' || host_char(c);  // '%' starts a zone (fe80::1%eth0)
}

// PROCGROUP_STORE_MAX_BYTES: bytes, or with a K, M, G or T suffix (binary: 512M = 512 MiB).
Result<size_t> store_max_bytes() {
  const char* text = std::getenv("PROCGROUP_STORE_MAX_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultMaxStoreBytes;
  const std::string_view s(text);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  std::string_view unit(end, static_cast<size_t>(s.data() + s.size() - end));
  int shift = 0;
  if (!unit.empty()) {
    const std::string_view units = "KMGT";
    const size_t at =
        units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (at != std::string_view::npos) {
      shift = 10 * static_cast<int>(at + 1);
      unit.remove_prefix(1);
      if (unit == "iB" || unit == "B") unit = {};
    }
  }
  if (ec != std::errc() || !unit.empty() || value == 0 || value > (uint64_t{1} << (63 - shift))) {
    return make_error(PG_ERR_CONFIG,
                      "PROCGROUP_STORE_MAX_BYTES='{}' is not a positive size in bytes (e.g. "
                      "268435456, 512M or 2G)",
                      s);
  }
  return static_cast<size_t>(value << shift);
}

Status bad_url(std::string_view url, std::string_view why) {
  return make_error(PG_ERR_CONFIG,
                    "malformed store URL '{}': {} (expected tcp://host:port, "
                    "c10d://host:port[/key/prefix/], file:///abs/path or memory:)",
                    url, why);
}

Result<StoreUrl> parse_tcp(std::string_view url, std::string_view rest) {
  StoreUrl out;
  out.kind = StoreUrl::kTcp;
  size_t colon;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad_url(url, "'[' without ']'");
    out.host = std::string(rest.substr(1, close - 1));
    if (out.host.find(':') == std::string::npos ||
        !std::all_of(out.host.begin(), out.host.end(), ipv6_char)) {
      return bad_url(url, "brackets must hold an IPv6 address");
    }
    if (close + 1 >= rest.size() || rest[close + 1] != ':') {
      return bad_url(url, "missing ':port' after the address");
    }
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad_url(url, "missing ':port'");
    out.host = std::string(rest.substr(0, colon));
    if (out.host.find(':') != std::string::npos) {
      return bad_url(url, "an IPv6 address needs brackets, as in tcp://[::1]:29500");
    }
    if (out.host.empty()) return bad_url(url, "missing host");
    if (!std::all_of(out.host.begin(), out.host.end(), host_char)) {
      return bad_url(url, fmt::format("'{}' is not a host name or address", out.host));
    }
  }
  std::string_view port = rest.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || out.port < 0 ||
      out.port > 65535) {
    return bad_url(url, fmt::format("port '{}' is not a number in 0..65535", port));
  }
  return out;
}

// c10d://host:port[/key/prefix/][?agent]: host and port as for tcp://.
Result<StoreUrl> parse_c10d(std::string_view url, std::string_view rest) {
  bool agent = false;
  if (size_t query = rest.find('?'); query != std::string_view::npos) {
    if (rest.substr(query + 1) != "agent") return bad_url(url, "the only query is '?agent'");
    agent = true;
    rest = rest.substr(0, query);
  }
  std::string prefix = "procgroup/";
  // Host names, IPv4 and bracketed IPv6 addresses hold no '/': the first one starts the path.
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (path.find('\0') != std::string_view::npos) return bad_url(url, "NUL in the key prefix");
    if (!path.empty()) prefix = path.ends_with('/') ? std::string(path) : std::string(path) + "/";
  }
  PG_ASSIGN_OR_RETURN(StoreUrl out, parse_tcp(url, rest));
  if (out.port == 0) return bad_url(url, "a c10d store needs its port, not 0");
  out.kind = StoreUrl::kC10d;
  out.key_prefix = std::move(prefix);
  out.agent = agent;
  return out;
}

// Keeps the server alive for as long as the store: rank 0's clients talk through it.
class HostedTcpStore final : public Store {
 public:
  HostedTcpStore(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStoreClient> client)
      : server_(std::move(server)), client_(std::move(client)) {}

  Status set(std::string_view key, std::span<const uint8_t> value) override {
    return client_->set(key, value);
  }
  Result<Bytes> get(std::string_view key, Millis timeout) override {
    return client_->get(key, timeout);
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    return client_->add(key, delta);
  }
  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                            std::span<const uint8_t> desired) override {
    return client_->compare_set(key, expected, desired);
  }
  Result<bool> remove(std::string_view key) override { return client_->remove(key); }
  Status wait(std::span<const std::string> keys, Millis timeout) override {
    return client_->wait(keys, timeout);
  }
  Result<bool> check(std::span<const std::string> keys) override { return client_->check(keys); }

 private:
  // Declared in this order so the client's connections close before the server stops.
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
};

Result<std::shared_ptr<Store>> open_tcp(const StoreUrl& url, const StoreConfig& config) {
  if (url.port == 0 && config.world_size > 1) {
    return make_error(PG_ERR_CONFIG,
                      "store URL '{}' has port 0: other ranks could not find an ephemeral port",
                      config.url);
  }
  TcpStoreClientOptions client{url.host, url.port, config.token, config.timeout};
  if (config.rank != 0) {
    PG_ASSIGN_OR_RETURN(auto only_client, TcpStoreClient::connect(std::move(client)));
    return std::shared_ptr<Store>(std::move(only_client));
  }
  TcpStoreServerOptions options;
  options.host = url.host;
  options.port = url.port;
  options.token = config.token;
  PG_ASSIGN_OR_RETURN(options.max_bytes, store_max_bytes());
  PG_ASSIGN_OR_RETURN(auto server, TcpStoreServer::start(std::move(options)));
  client.port = server->port();
  PG_ASSIGN_OR_RETURN(auto own_client, TcpStoreClient::connect(std::move(client)));
  return std::shared_ptr<Store>(
      std::make_shared<HostedTcpStore>(std::move(server), std::move(own_client)));
}

// Someone else hosts the store, so every rank, rank 0 included, is a plain client.
Result<std::shared_ptr<Store>> open_c10d(const StoreUrl& url, const StoreConfig& config) {
  C10dStoreClientOptions options{url.host, url.port, url.key_prefix, "torch's c10d TCPStore",
                                 config.timeout};
  if (url.agent) options.name = "torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True)";
  if (!config.token.empty()) {
    return make_error(PG_ERR_CONFIG,
                      "a store token is set, but {} at {} is torch's TCPStore, which cannot "
                      "check one: unset PROCGROUP_STORE_TOKEN (or use a tcp:// store)",
                      options.name, host_port(url.host, url.port));
  }
  PG_ASSIGN_OR_RETURN(auto client, C10dStoreClient::connect(std::move(options)));
  return std::shared_ptr<Store>(std::move(client));
}

}  // namespace

Result<StoreUrl> parse_store_url(std::string_view url) {
  constexpr std::string_view kTcp = "tcp://";
  constexpr std::string_view kFile = "file://";
  constexpr std::string_view kC10d = "c10d://";
  if (url == "memory:") return StoreUrl{};
  if (url.starts_with(kTcp)) return parse_tcp(url, url.substr(kTcp.size()));
  if (url.starts_with(kC10d)) return parse_c10d(url, url.substr(kC10d.size()));
  if (url.starts_with(kFile)) {
    std::string_view rest = url.substr(kFile.size());
    if (rest.starts_with("localhost/")) rest.remove_prefix(std::string_view("localhost").size());
    if (rest.empty() || rest.front() != '/') {
      return bad_url(url, "a file store needs an absolute path, as in file:///tmp/job");
    }
    if (rest == "/") return bad_url(url, "the file store path is the root directory");
    if (rest.find('\0') != std::string_view::npos) return bad_url(url, "NUL in the path");
    StoreUrl out;
    out.kind = StoreUrl::kFile;
    out.path = std::string(rest);
    return out;
  }
  if (url.empty()) return bad_url(url, "empty");
  return bad_url(url, "unknown scheme");
}

Result<std::shared_ptr<Store>> open_store(const StoreConfig& config) {
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "store for rank {} of world size {}", config.rank,
                      config.world_size);
  }
  if (config.timeout <= Millis(0)) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "store timeout {} ms is not positive",
                      config.timeout.count());
  }
  PG_ASSIGN_OR_RETURN(StoreUrl url, parse_store_url(config.url));
  switch (url.kind) {
    case StoreUrl::kMemory:
      if (config.world_size > 1) {
        return make_error(PG_ERR_CONFIG,
                          "store URL 'memory:' is private to one process; world size {} needs "
                          "tcp://host:port or file:///path",
                          config.world_size);
      }
      return make_memory_store();
    case StoreUrl::kFile: {
      PG_ASSIGN_OR_RETURN(auto store, FileStore::open(url.path, config.timeout));
      return std::shared_ptr<Store>(std::move(store));
    }
    case StoreUrl::kTcp: return open_tcp(url, config);
    case StoreUrl::kC10d: return open_c10d(url, config);
  }
  return make_error(PG_ERR_INTERNAL, "unhandled store URL '{}'", config.url);
}

}  // namespace procgroup::detail
