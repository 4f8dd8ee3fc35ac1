// open_store(): URL parsing and the factory behind store.h.
#include "store/open_store.h"

#include <algorithm>
#include <charconv>

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

Status bad_url(std::string_view url, std::string_view why) {
  return make_error(PG_ERR_CONFIG,
                    "malformed store URL '{}': {} (expected tcp://host:port, file:///abs/path "
                    "or memory:)",
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
  PG_ASSIGN_OR_RETURN(auto server, TcpStoreServer::start(std::move(options)));
  client.port = server->port();
  PG_ASSIGN_OR_RETURN(auto own_client, TcpStoreClient::connect(std::move(client)));
  return std::shared_ptr<Store>(
      std::make_shared<HostedTcpStore>(std::move(server), std::move(own_client)));
}

}  // namespace

Result<StoreUrl> parse_store_url(std::string_view url) {
  constexpr std::string_view kTcp = "tcp://";
  constexpr std::string_view kFile = "file://";
  if (url == "memory:") return StoreUrl{};
  if (url.starts_with(kTcp)) return parse_tcp(url, url.substr(kTcp.size()));
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
  }
  return make_error(PG_ERR_INTERNAL, "unhandled store URL '{}'", config.url);
}

}  // namespace procgroup::detail
