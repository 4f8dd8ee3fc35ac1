// A rank for the fault-injection tests (fault_matrix_test.cc): creates the world group
// from the environment, runs one scenario in which one rank (the victim) dies or stops
// at a chosen point, and reports what the survivors saw as one machine-readable line each:
//
//   FAULT rank=1 what=sigkill t_ms=...                     the victim, just before the fault
//   RESULT rank=0 op=create status=PG_ERR_PEER_LOST t_ms=... took_ms=... msg=...
//   LATER rank=0 status=PG_ERR_ABORTED took_ms=... msg=...  a call after the failure
//
//   fault_worker rendezvous [--victim R]      victim dies inside pg_group_create
//   fault_worker large      [--victim R] [--mib N]   victim dies during an N MiB allreduce
//   fault_worker between    [--victim R]      victim dies after a completed collective
//   fault_worker stop       [--victim R]      victim SIGSTOPs itself before a collective
//   fault_worker healthy [--iters N] [--cut-file PATH]  no fault: N checked allreduces must
//                                             succeed; with PATH, halfway they wait for it
//   fault_worker p2p-mismatch [--victim R] [--op smaller|larger]  rank 0 sends 1000 floats,
//                                             the victim posts a receive of 500 (or 2000)
//   fault_worker coll-mismatch [--victim R] [--op NAME]  the victim passes another count
//   fault_worker args-mismatch [--victim R] --op WHAT   the victim passes other arguments,
//                                             same sizes; WHAT: reduce_op, dtype, root,
//                                             reduce_root, bcast_count, p2p_dtype
//   fault_worker multihost --cut-file PATH    collectives checked across hosts (CHECKED line),
//                                             then, once PATH exists, one more allreduce
//   --survive-sigterm: ignore pgrun's SIGTERM (it sends SIGKILL after --kill-grace)
//   --debug-rank R: rank R alone sets PROCGROUP_DEBUG=detail before creating its group
//   --late-ms M: args-mismatch: rank 0 enters the operation M ms after the others
//   --other-backend R NAME: rank R alone uses backend NAME
//
// Exit codes: 0 success (healthy), 3 the expected error was seen, 1 anything unexpected.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/procgroup.h"

namespace {

constexpr int kSawError = 3;
constexpr int kUnexpected = 1;

struct Args {
  std::string scenario;
  int victim = 1;
  int mib = 64;
  std::string op = "allreduce";
  std::string cut_file;
  int iters = 1;
  bool survive_sigterm = false;
  int debug_rank = -1;
  int late_ms = 0;
  int other_backend_rank = -1;
  std::string other_backend;
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// One line, written at once (ranks share pgrun's pipes only through their own prefixer).
void say(const std::string& line) {
  std::string text = line + "\n";
  fwrite(text.data(), 1, text.size(), stdout);
  fflush(stdout);
}

// Newlines in messages would split the report line.
std::string one_line(const char* text) {
  std::string s = text != nullptr ? text : "";
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

[[noreturn]] void die_now(int rank, const char* what) {
  say("FAULT rank=" + std::to_string(rank) + " what=" + what + " t_ms=" + std::to_string(now_ms()));
  raise(SIGKILL);
  std::abort();  // not reached
}

void report(const char* tag, int rank, const char* op, pg_status_t st, int64_t start_ms) {
  const int64_t t = now_ms();
  say(std::string(tag) + " rank=" + std::to_string(rank) + " op=" + op +
      " status=" + pg_status_name(st) + " t_ms=" + std::to_string(t) +
      " took_ms=" + std::to_string(t - start_ms) +
      " msg=" + (st == PG_OK ? std::string() : one_line(pg_last_error())));
}

pg_status_t small_allreduce(pg_group_t g) {
  float x = 1.0f;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
  return pg_allreduce(g, nullptr, &b, nullptr, nullptr);
}

// After a failure: the next call must fail at once, naming the first failure.
int check_later_call(pg_group_t g, int rank) {
  const int64_t start = now_ms();
  pg_status_t st = small_allreduce(g);
  report("LATER", rank, "allreduce", st, start);
  return st == PG_OK ? kUnexpected : kSawError;
}

int finish(pg_group_t g, int rc) {
  pg_group_destroy(g);
  return rc;
}

int run_rendezvous(const Args& a, int rank, int size) {
  if (rank == a.victim) {
    // Dies while the others wait for the last rank to publish its address.
    std::thread([rank] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      die_now(rank, "sigkill");
    }).detach();
  }
  const int late = a.victim == size - 1 ? size - 2 : size - 1;
  if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  if (rank == a.debug_rank) setenv("PROCGROUP_DEBUG", "detail", 1);
  if (rank == a.other_backend_rank) setenv("PROCGROUP_BACKEND", a.other_backend.c_str(), 1);
  const int64_t start = now_ms();
  pg_group_t g = nullptr;
  pg_status_t st = pg_group_create(nullptr, &g);
  if (rank == a.victim) std::this_thread::sleep_for(std::chrono::hours(1));  // killed meanwhile
  report("RESULT", rank, "create", st, start);
  if (st == PG_OK) return finish(g, kUnexpected);
  return kSawError;
}

int run_after_create(const Args& a, pg_group_t g, int rank) {
  pg_status_t st = small_allreduce(g);  // op #1: everybody is up
  if (st != PG_OK) {
    report("RESULT", rank, "warmup", st, now_ms());
    return finish(g, kUnexpected);
  }
  int64_t start = now_ms();
  if (a.scenario == "between") {
    if (rank == a.victim) die_now(rank, "sigkill");
    st = small_allreduce(g);  // op #2
  } else if (a.scenario == "stop") {
    if (rank == a.victim) {
      say("FAULT rank=" + std::to_string(rank) + " what=sigstop t_ms=" + std::to_string(now_ms()));
      raise(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::hours(1));  // pgrun kills it
    }
    st = small_allreduce(g);  // op #2
  } else {                    // large
    std::vector<float> data(static_cast<size_t>(a.mib) << 18, 1.0f);
    pg_buffer_t b = pg_buffer_cpu(data.data(), data.size(), PG_DTYPE_F32);
    pg_work_t w = nullptr;
    start = now_ms();
    st = pg_allreduce(g, nullptr, &b, nullptr, &w);
    if (st == PG_OK && rank == a.victim) {
      // Moving 64 MiB takes tens of ms even through shared memory: 2 ms in, the others
      // cannot have everything they need from this rank yet.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      die_now(rank, "sigkill");
    }
    if (st == PG_OK) {
      st = pg_work_wait(w, -1);
      pg_work_release(w);
    }
  }
  report("RESULT", rank, "allreduce", st, start);
  if (st == PG_OK) return finish(g, kUnexpected);
  return finish(g, check_later_call(g, rank));
}

// Rank 0 sends 1000 floats to the victim, which posts a receive of 500 (or 2000).
int run_p2p_mismatch(const Args& a, pg_group_t g, int rank) {
  const size_t mine = rank == a.victim ? (a.op == "larger" ? 2000 : 500) : 1000;
  std::vector<float> data(mine + 16, 7.0f);
  pg_buffer_t b = pg_buffer_cpu(data.data(), mine, PG_DTYPE_F32);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.tag = 5;
  const int64_t start = now_ms();
  pg_status_t st = PG_OK;
  if (rank == 0) {
    o.peer = a.victim;
    st = pg_send(g, &b, &o, nullptr);
  } else if (rank == a.victim) {
    o.peer = 0;
    std::fill(data.begin(), data.end(), 0.0f);
    st = pg_recv(g, &b, &o, nullptr);
    if (data[mine] != 0.0f) say("CORRUPT rank=" + std::to_string(rank) + " wrote past the buffer");
  }
  report("RESULT", rank, rank == 0 ? "send" : "recv", st, start);
  // The group stays usable when nothing was delivered wrongly: a collective after it.
  const int64_t after = now_ms();
  pg_status_t next = small_allreduce(g);
  report("NEXT", rank, "allreduce", next, after);
  return finish(g, st == PG_OK ? 0 : kSawError);
}

// Every rank calls the same collective, but the victim with another count.
int run_coll_mismatch(const Args& a, pg_group_t g, int rank, int size) {
  const size_t n = rank == a.victim ? 1500 : 1000;
  const size_t big = n * static_cast<size_t>(size);
  std::vector<float> in(big, 1.0f), out(big + 64, 0.0f);
  pg_buffer_t bin = pg_buffer_cpu(in.data(), n, PG_DTYPE_F32);
  pg_buffer_t bout = pg_buffer_cpu(out.data(), n, PG_DTYPE_F32);
  pg_buffer_t bin_all = pg_buffer_cpu(in.data(), big, PG_DTYPE_F32);
  pg_buffer_t bout_all = pg_buffer_cpu(out.data(), big, PG_DTYPE_F32);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  const int64_t start = now_ms();
  pg_status_t st;
  if (a.op == "broadcast") {
    st = pg_broadcast(g, &bin, &bout, &o, nullptr);
  } else if (a.op == "allgather") {
    st = pg_allgather(g, &bin, &bout_all, &o, nullptr);
  } else if (a.op == "reduce_scatter") {
    st = pg_reduce_scatter(g, &bin_all, &bout, &o, nullptr);
  } else if (a.op == "alltoall") {
    st = pg_alltoall(g, &bin_all, &bout_all, &o, nullptr);
  } else {
    st = pg_allreduce(g, &bin, &bout, &o, nullptr);
  }
  report("RESULT", rank, a.op.c_str(), st, start);
  if (out[big] != 0.0f) say("CORRUPT rank=" + std::to_string(rank) + " wrote past the buffer");
  // A rank whose arguments matched its partners' may well succeed (a broadcast leaf).
  if (st == PG_OK) return finish(g, 0);
  return finish(g, check_later_call(g, rank));
}

// The victim passes the same sizes as rank 0 but another reduce op, dtype or root (or
// another broadcast count, or a recv of another dtype); RESULT has the data it ended with.
int run_args_mismatch(const Args& a, pg_group_t g, int rank) {
  const bool victim = rank == a.victim;
  float f[4] = {1, 2, 3, 4};
  int32_t i[4] = {1, 2, 3, 4};
  std::vector<float> big(victim ? 1500 : 1000, 1.0f);
  pg_buffer_t b = pg_buffer_cpu(f, 4, PG_DTYPE_F32);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  if (rank == 0 && a.late_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.late_ms));
  const int64_t start = now_ms();
  pg_status_t st;
  if (a.op == "reduce_op") {
    if (victim) f[0] = 9;
    o.reduce_op = victim ? PG_REDUCE_MAX : PG_REDUCE_SUM;
    st = pg_allreduce(g, nullptr, &b, &o, nullptr);
  } else if (a.op == "dtype") {
    if (victim) b = pg_buffer_cpu(i, 4, PG_DTYPE_I32);
    st = pg_allreduce(g, nullptr, &b, &o, nullptr);
  } else if (a.op == "root") {
    o.root = rank;  // every rank thinks it is the root
    st = pg_broadcast(g, nullptr, &b, &o, nullptr);
  } else if (a.op == "reduce_root") {  // both think they are the root: each waits
    o.root = rank;
    st = pg_reduce(g, nullptr, &b, &o, nullptr);
  } else if (a.op == "bcast_count") {
    pg_buffer_t bb = pg_buffer_cpu(big.data(), big.size(), PG_DTYPE_F32);
    st = pg_broadcast(g, nullptr, &bb, &o, nullptr);
  } else {  // p2p_dtype: rank 0 sends f32 x 4, the victim receives i32 x 4
    o.tag = 5;
    o.peer = victim ? 0 : a.victim;
    if (victim) b = pg_buffer_cpu(i, 4, PG_DTYPE_I32);
    st = rank == 0 ? pg_send(g, &b, &o, nullptr) : victim ? pg_recv(g, &b, &o, nullptr) : PG_OK;
  }
  report("RESULT", rank, a.op.c_str(), st, start);
  say("DATA rank=" + std::to_string(rank) + " f=" + std::to_string(f[0]) + "," +
      std::to_string(f[1]) + " i=" + std::to_string(i[0]) + "," + std::to_string(i[1]));
  if (a.op == "p2p_dtype") {  // only the recv failed: the group stays usable
    const int64_t after = now_ms();
    report("NEXT", rank, "allreduce", small_allreduce(g), after);
    return finish(g, st == PG_OK ? 0 : kSawError);
  }
  if (st == PG_OK) return finish(g, 0);
  return finish(g, check_later_call(g, rank));
}

// Waits (up to 60 s) until the test creates path.
void wait_for_file(const std::string& path) {
  for (int i = 0; i < 600 && access(path.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Collectives whose results show every rank took part, then the link is cut (the test
// creates cut_file once it has) and the next allreduce must fail within two timeouts.
int run_multihost(const Args& a, pg_group_t g, int rank, int size) {
  std::vector<int64_t> v(1 << 16, rank + 1);
  pg_buffer_t b = pg_buffer_cpu(v.data(), v.size(), PG_DTYPE_I64);
  pg_status_t st = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
  bool good = st == PG_OK && v.back() == int64_t{size} * (size + 1) / 2;
  std::vector<int32_t> mine(4, rank), all(4 * static_cast<size_t>(size), -1);
  pg_buffer_t bm = pg_buffer_cpu(mine.data(), 4, PG_DTYPE_I32);
  pg_buffer_t ba = pg_buffer_cpu(all.data(), all.size(), PG_DTYPE_I32);
  if (good) st = pg_allgather(g, &bm, &ba, nullptr, nullptr);
  for (int r = 0; good && r < size; ++r) good = st == PG_OK && all[4 * r + 3] == r;
  say("CHECKED rank=" + std::to_string(rank) + " good=" + (good ? "1" : "0") +
      " status=" + pg_status_name(st));
  if (!good) return finish(g, kUnexpected);
  const std::string checked = a.cut_file + ".checked." + std::to_string(rank);
  if (FILE* f = std::fopen(checked.c_str(), "w")) std::fclose(f);
  wait_for_file(a.cut_file);
  const int64_t start = now_ms();
  st = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
  report("RESULT", rank, "allreduce", st, start);
  if (st == PG_OK) return finish(g, kUnexpected);
  return finish(g, check_later_call(g, rank));
}

Args parse(int argc, char** argv) {
  Args a;
  a.scenario = argc > 1 ? argv[1] : "healthy";
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (k == "--survive-sigterm") {
      a.survive_sigterm = true;
      continue;
    }
    if (k == "--victim") a.victim = std::atoi(v);
    if (k == "--mib") a.mib = std::atoi(v);
    if (k == "--op") a.op = v;
    if (k == "--cut-file") a.cut_file = v;
    if (k == "--iters") a.iters = std::atoi(v);
    if (k == "--debug-rank") a.debug_rank = std::atoi(v);
    if (k == "--late-ms") a.late_ms = std::atoi(v);
    if (k == "--other-backend" && i + 2 < argc) {
      a.other_backend_rank = std::atoi(v);
      a.other_backend = argv[i + 2];
      ++i;
    }
    ++i;
  }
  return a;
}

int run(const Args& a) {
  const int rank = env_int("RANK", 0), size = env_int("WORLD_SIZE", 1);
  if (a.scenario == "rendezvous") return run_rendezvous(a, rank, size);

  if (rank == a.debug_rank) setenv("PROCGROUP_DEBUG", "detail", 1);
  if (rank == a.other_backend_rank) setenv("PROCGROUP_BACKEND", a.other_backend.c_str(), 1);
  const int64_t start = now_ms();
  pg_group_t g = nullptr;
  pg_status_t st = pg_group_create(nullptr, &g);
  if (st != PG_OK) {
    report("RESULT", rank, "create", st, start);
    return kUnexpected;
  }
  if (a.scenario == "healthy") {
    for (int i = 0; i < a.iters && st == PG_OK; ++i) {
      if (i == a.iters / 2 && !a.cut_file.empty()) wait_for_file(a.cut_file);
      std::vector<int32_t> v(1024, rank + i);
      pg_buffer_t b = pg_buffer_cpu(v.data(), v.size(), PG_DTYPE_I32);
      st = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
      if (st == PG_OK && v[1023] != size * i + size * (size - 1) / 2) st = PG_ERR_INTERNAL;
    }
    report("RESULT", rank, "allreduce", st, start);
    return finish(g, st == PG_OK ? 0 : kUnexpected);
  }
  if (a.scenario == "p2p-mismatch") return run_p2p_mismatch(a, g, rank);
  if (a.scenario == "coll-mismatch") return run_coll_mismatch(a, g, rank, size);
  if (a.scenario == "args-mismatch") return run_args_mismatch(a, g, rank);
  if (a.scenario == "multihost") return run_multihost(a, g, rank, size);
  return run_after_create(a, g, rank);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  // pgrun stops the others as soon as the victim dies; the matrix wants to see what the
  // library does on its own (as on another node), so the survivors may outlive that.
  if (a.survive_sigterm) signal(SIGTERM, SIG_IGN);
  const std::string rank = std::to_string(env_int("RANK", 0));
  say("PID rank=" + rank + " pid=" + std::to_string(getpid()));
  const int rc = run(a);
  say("EXIT rank=" + rank + " code=" + std::to_string(rc));  // absent: it crashed or hung
  return rc;
}
