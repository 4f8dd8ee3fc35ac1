#include "c10d_test_servers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

namespace procgroup::detail::store_testing {
namespace {

constexpr uint32_t kValidateMagic = 0x3C85F7CE;
constexpr Millis kPollSlice{50};  // how often blocked fake-server threads look at stop_

// Waits up to timeout for pid to exit, then SIGKILLs it; reaps it either way.
void reap(pid_t pid, Millis timeout) {
  const Deadline deadline = Deadline::after(timeout);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (deadline.expired()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(Millis(20));
  }
}

// Starts argv[0] with its stdin and stdout on pipes; stderr stays the test's.
pid_t spawn(const std::vector<std::string>& argv, UniqueFd* to_child, UniqueFd* from_child) {
  int in[2];
  int out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return -1;
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return -1;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child->reset(in[1]);
  from_child->reset(out[0]);
  return pid;
}

void put_u64(Bytes& out, uint64_t v) {
  uint8_t b[8];
  std::memcpy(b, &v, 8);
  out.insert(out.end(), b, b + 8);
}

Bytes vector_reply(const std::string& value) {
  Bytes out;
  put_u64(out, value.size());
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

}  // namespace

const std::string& TorchStoreServer::unavailable() {
  static const std::string why = [] {
    UniqueFd to_child;
    UniqueFd from_child;
    pid_t pid = spawn({TORCH_PYTHON, "-c",
                       "import torch.distributed as d; print(d.is_available(), flush=True)"},
                      &to_child, &from_child);
    if (pid < 0) return std::string("cannot start " TORCH_PYTHON);
    to_child.reset();
    std::string got;
    const Deadline deadline = Deadline::after(Millis(60000));
    char buf[64];
    while (got.find('\n') == std::string::npos) {
      auto ready = wait_fd(from_child.get(), POLLIN, deadline);
      ssize_t n = ready.ok() && *ready != 0 ? ::read(from_child.get(), buf, sizeof buf) : 0;
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    reap(pid, Millis(5000));
    if (got == "True\n") return std::string();
    return std::string(TORCH_PYTHON
                       " cannot import torch.distributed (install python3-torch) so there is "
                       "no real c10d TCPStore to test against");
  }();
  return why;
}

TorchStoreServer::TorchStoreServer() {
  ::signal(SIGPIPE, SIG_IGN);  // a child that died must fail a test, not kill the binary
  pid_ = spawn({TORCH_PYTHON, TORCH_STORE_SERVER_SCRIPT}, &to_child_, &from_child_);
  if (pid_ < 0) {
    error_ = "cannot start " TORCH_PYTHON;
    return;
  }
  // Importing torch takes seconds, more on a loaded machine.
  std::string line = read_line(Deadline::after(Millis(60000)));
  std::istringstream fields(line);
  if (!(fields >> port_ >> version_)) {
    port_ = 0;
    error_ = "torch_store_server.py did not print its port (got '" + line + "')";
  }
}

TorchStoreServer::~TorchStoreServer() { stop(); }

void TorchStoreServer::stop() {
  to_child_.reset();
  if (pid_ > 0) reap(pid_, Millis(10000));
  pid_ = -1;
}

std::string TorchStoreServer::read_line(Deadline deadline) {
  char buf[4096];
  for (;;) {
    size_t end = pending_.find('\n');
    if (end != std::string::npos) {
      std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return line;
    }
    auto ready = wait_fd(from_child_.get(), POLLIN, deadline);
    if (!ready.ok() || *ready == 0) return "";
    ssize_t n = ::read(from_child_.get(), buf, sizeof buf);
    if (n <= 0) return "";
    pending_.append(buf, static_cast<size_t>(n));
  }
}

std::string TorchStoreServer::command(const std::string& json, Millis timeout) {
  std::string line = json + "\n";
  if (::write(to_child_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    return "";
  }
  return read_line(Deadline::after(timeout));
}

FakeC10dServer::FakeC10dServer(Flavor flavor) : flavor_(flavor) {
  listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_.get(), 16) != 0 ||
      ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeC10dServer::~FakeC10dServer() {
  stop_ = true;
  changed_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

void FakeC10dServer::accept_loop() {
  while (!stop_) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kPollSlice.count())) <= 0) continue;
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

bool FakeC10dServer::read(int fd, void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    if (stop_) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(kPollSlice.count())) <= 0) continue;
    ssize_t got = ::recv(fd, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool FakeC10dServer::read_str(int fd, std::string* out) {
  uint64_t n = 0;
  if (!read(fd, &n, sizeof n) || n > (size_t{1} << 20)) return false;
  out->resize(n);
  return read(fd, out->data(), n);
}

bool FakeC10dServer::write(int fd, const Bytes& data) {
  return ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

void FakeC10dServer::serve(int raw_fd) {
  UniqueFd fd(raw_fd);
  uint8_t op = 0;
  if (!read(fd.get(), &op, 1)) return;
  if (op != 0) {  // not VALIDATE
    ++unvalidated_;
    char sink[256];  // libuv: unanswered, then closed at the client's EOF; classic: closed now
    while (flavor_ == Flavor::kLibuv && read(fd.get(), sink, 1)) {
    }
    return;
  }
  uint32_t magic = 0;
  if (!read(fd.get(), &magic, sizeof magic) || magic != kValidateMagic) return;
  for (;;) {
    if (!read(fd.get(), &op, 1)) return;
    std::string key, a, b;
    std::vector<std::string> keys;
    uint64_t count = 0;
    int64_t delta = 0;
    Bytes reply;
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    auto all_set = [&] {
      for (const auto& k : keys) {
        if (!data_.count(k)) return false;
      }
      return true;
    };
    if (op == 5 || op == 6) {  // CHECK, WAIT: count then keys
      if (!read(fd.get(), &count, sizeof count) || count > 1024) return;
      keys.resize(count);
      for (auto& k : keys) {
        if (!read_str(fd.get(), &k)) return;
      }
    } else if (!read_str(fd.get(), &key)) {
      return;
    }
    if (op == 1) {  // SET
      if (!read_str(fd.get(), &a)) return;
      lock.lock();
      data_[key] = a;
      changed_.notify_all();
    } else if (op == 2) {  // COMPARE_SET, answering expected for an absent key, as torch does
      if (!read_str(fd.get(), &a) || !read_str(fd.get(), &b)) return;
      lock.lock();
      auto it = data_.find(key);
      if (it == data_.end()) {
        if (a.empty()) data_[key] = b;
        reply = vector_reply(a.empty() ? b : a);
      } else {
        if (it->second == a) it->second = b;
        reply = vector_reply(it->second);
      }
      changed_.notify_all();
    } else if (op == 3) {  // GET (libuv: empty for an absent key)
      lock.lock();
      reply = vector_reply(data_.count(key) ? data_[key] : "");
    } else if (op == 4) {  // ADD
      if (!read(fd.get(), &delta, sizeof delta)) return;
      lock.lock();
      int64_t value = delta + (data_.count(key) ? std::stoll(data_[key]) : 0);
      data_[key] = std::to_string(value);
      put_u64(reply, static_cast<uint64_t>(value));
      changed_.notify_all();
    } else if (op == 5) {  // CHECK
      lock.lock();
      reply = {static_cast<uint8_t>(all_set() ? 0 : 1)};
    } else if (op == 6) {  // WAIT: until set, the server stops or the client leaves
      lock.lock();
      while (!all_set()) {
        char c;
        if (stop_ || ::recv(fd.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return;
        changed_.wait_for(lock, kPollSlice);
      }
      reply = {0};
    } else if (op == 8) {  // DELETE_KEY
      lock.lock();
      put_u64(reply, data_.erase(key));
    } else {
      return;
    }
    if (lock.owns_lock()) lock.unlock();
    if (!reply.empty() && !write(fd.get(), reply)) return;
  }
}

}  // namespace procgroup::detail::store_testing
