// Point to point and barrier: messages between every pair of ranks (self included) in
// several dtypes and sizes, matching by (peer, tag) in issue order, blocking pairs at the
// largest tag, and barriers that must actually hold every rank back.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "scenario.h"

namespace pgtest {
namespace {

struct Message {
  int src = 0, dst = 0;
  pg_dtype_t dtype = PG_DTYPE_F32;
  uint64_t n = 0;
  int tag = 0;
  uint32_t salt = 0;
  std::string to_string() const {
    return "message " + std::to_string(salt) + " (" + dtype_name(dtype) + " x " +
           std::to_string(n) + ", rank " + std::to_string(src) + " -> " + std::to_string(dst) +
           ", tag " + std::to_string(tag) + ")";
  }
};

// One posted send or recv and what it must look like when done.
struct Posted {
  Message m;
  bool is_recv = false;
  std::unique_ptr<GuardedBuffer> buffer;
  std::vector<uint8_t> original;  // a send's payload, which must stay intact
  pg_work_t work = nullptr;
  bool submitted = false;
  pg_status_t status = PG_OK;
};

Route p2p_route(const RankContext& ctx, pg_dtype_t dtype) {
  return route_for(ctx.caps, PG_OP_SEND, dtype, PG_REDUCE_SUM);
}

// Posts a send or recv; a refusal is a failure unless `may_refuse`.
Posted post(RankContext& ctx, const Message& m, bool is_recv, bool blocking,
            bool may_refuse = false) {
  ctx.report.step(std::string(blocking ? "blocking " : "") + (is_recv ? "recv of " : "send of ") +
                  m.to_string());
  Posted p{m, is_recv, std::make_unique<GuardedBuffer>(m.dtype, m.n), {}, nullptr, false, PG_OK};
  if (is_recv) {
    p.buffer->fill_poison();
  } else {
    for (uint64_t i = 0; i < m.n; ++i)
      store_value(m.dtype, p.buffer->data(), i, message_value(m.dtype, m.src, m.dst, m.salt, i));
    p.original = p.buffer->snapshot();
  }
  pg_buffer_t b = pg_buffer_cpu(p.buffer->data(), m.n, m.dtype);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.peer = is_recv ? m.src : m.dst;
  o.tag = m.tag;
  pg_work_t* work = blocking ? nullptr : &p.work;
  const pg_status_t s =
      is_recv ? pg_recv(ctx.group, &b, &o, work) : pg_send(ctx.group, &b, &o, work);
  p.submitted = s == PG_OK;
  p.status = s;
  if (may_refuse) return p;
  if (!p.submitted) ctx.report.tally(PG_OP_SEND, m.dtype, p2p_route(ctx, m.dtype), false);
  ctx.report.expect(p.submitted, "rank " + std::to_string(ctx.rank) + ": " +
                                     (is_recv ? "recv of " : "send of ") + m.to_string() + ": " +
                                     pg_status_name(s) + ": " + pg_last_error());
  return p;
}

void check_done(RankContext& ctx, Posted& p);

// Waits for a posted send or recv, checks it and tallies it (as send/recv in its dtype).
void finish(RankContext& ctx, Posted& p) {
  if (!p.submitted) return;
  const int failures = ctx.report.failures();
  check_done(ctx, p);
  ctx.report.tally(PG_OP_SEND, p.m.dtype, p2p_route(ctx, p.m.dtype),
                   ctx.report.failures() == failures);
}

void check_done(RankContext& ctx, Posted& p) {
  const std::string what = "rank " + std::to_string(ctx.rank) + ": " +
                           (p.is_recv ? "recv of " : "send of ") + p.m.to_string();
  if (p.work) {
    ctx.report.step("waiting for the " + what);
    const pg_status_t s = pg_work_wait(p.work, -1);
    pg_work_release(p.work);
    p.work = nullptr;
    if (s != PG_OK) {
      ctx.report.fail(what + ": wait: " + pg_status_name(s) + ": " + pg_last_error());
      return;
    }
  }
  if (!p.buffer->guards_intact()) return ctx.report.fail(what + ": wrote outside the buffer");
  if (!p.is_recv)
    return ctx.report.expect(p.buffer->same_as(p.original), what + ": payload modified");
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < p.m.n; ++i)
    wrong += load_value(p.m.dtype, p.buffer->data(), i) !=
             message_value(p.m.dtype, p.m.src, p.m.dst, p.m.salt, i);
  ctx.report.expect(wrong == 0, what + ": " + std::to_string(wrong) + " of " +
                                    std::to_string(p.m.n) + " elements wrong");
}

void send_recv_scenario(RankContext& ctx) {
  constexpr uint64_t kSizes[] = {0, 1, 7, 4096 + 3};
  const std::vector<pg_dtype_t> dtypes = all_dtypes();
  const int size = ctx.size, me = ctx.rank;
  auto message = [&](int src, int dst) {
    const int tag = 1000 + src * size + dst;
    return Message{src,
                   dst,
                   dtypes[(5 * src + 3 * dst) % dtypes.size()],
                   kSizes[(src + 2 * dst) % 4],
                   tag,
                   static_cast<uint32_t>(tag)};
  };
  // 1. To itself: a backend may refuse (gloo does), but then both sides, with
  // PG_ERR_UNSUPPORTED; otherwise the message must arrive.
  std::vector<Posted> posted;
  {
    Posted in = post(ctx, message(me, me), true, false, true);
    Posted out = post(ctx, message(me, me), false, false, true);
    if (!in.submitted && !out.submitted && in.status == PG_ERR_UNSUPPORTED &&
        out.status == PG_ERR_UNSUPPORTED) {
      ctx.report.counted(Route::kUnsupported);
      ctx.report.tally(PG_OP_SEND, message(me, me).dtype, Route::kUnsupported, true);
    } else {
      ctx.report.expect(in.submitted && out.submitted,
                        "rank " + std::to_string(me) +
                            ": a message to itself was refused on one "
                            "side only, or with another status than PG_ERR_UNSUPPORTED: " +
                            pg_status_name(in.status) + " / " + pg_status_name(out.status));
      finish(ctx, out);
      finish(ctx, in);
    }
  }
  if (size == 1) return;
  // 2. Every ordered pair of distinct ranks: receives posted first (descending peers), then
  // sends (ascending), all asynchronous, waited for newest first.
  for (int src = size - 1; src >= 0; --src)
    if (src != me) posted.push_back(post(ctx, message(src, me), true, false));
  for (int dst = 0; dst < size; ++dst)
    if (dst != me) posted.push_back(post(ctx, message(me, dst), false, false));
  for (size_t i = posted.size(); i-- > 0;) finish(ctx, posted[i]);
  posted.clear();
  const int next = (me + 1) % size, prev = (me + size - 1) % size;

  // 3. Three messages with one (peer, tag) arrive in issue order.
  for (uint32_t k = 0; k < 3; ++k) {
    posted.push_back(post(ctx, {prev, me, PG_DTYPE_I32, 33, 7, 10 + k}, true, false));
    posted.push_back(post(ctx, {me, next, PG_DTYPE_I32, 33, 7, 10 + k}, false, false));
  }
  // 4. Tags match independently of issue order: tag 101's recv is posted before tag 100's.
  posted.push_back(post(ctx, {prev, me, PG_DTYPE_F64, 9, 101, 21}, true, false));
  posted.push_back(post(ctx, {prev, me, PG_DTYPE_F64, 9, 100, 20}, true, false));
  posted.push_back(post(ctx, {me, next, PG_DTYPE_F64, 9, 100, 20}, false, false));
  posted.push_back(post(ctx, {me, next, PG_DTYPE_F64, 9, 101, 21}, false, false));
  for (Posted& p : posted) finish(ctx, p);
  posted.clear();

  // 5. Blocking pairs (0,1), (2,3), ... at the largest tag; an odd last rank sits out.
  constexpr int kMaxTag = (1 << 30) - 1;
  const int partner = me ^ 1;
  if (partner < size) {
    const Message out{me, partner, PG_DTYPE_I64, 4096 + 3, kMaxTag, 30};
    const Message in{partner, me, PG_DTYPE_I64, 4096 + 3, kMaxTag, 30};
    if (me % 2 == 0) posted.push_back(post(ctx, out, false, true));
    posted.push_back(post(ctx, in, true, true));
    if (me % 2 == 1) posted.push_back(post(ctx, out, false, true));
    for (Posted& p : posted) finish(ctx, p);
  }
}

// Each rank arrives at a different time and leaves a file; after the barrier every
// rank's file of that round must exist.
void barrier_scenario(RankContext& ctx) {
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(15 * ((7 * ctx.rank + 3 * round) % 4)));
    touch_file(ctx.dir + "/barrier" + std::to_string(round) + "_" + std::to_string(ctx.rank));
    ctx.report.step("barrier round " + std::to_string(round));
    pg_op_options_t o = PG_OP_OPTIONS_INIT;
    o.timeout_ms = round == 3 ? 30000 : 0;  // a per-operation timeout changes nothing here
    pg_status_t s = PG_OK;
    if (round % 2 == 0) {
      s = pg_barrier(ctx.group, &o, nullptr);
    } else {
      pg_work_t w = nullptr;
      s = pg_barrier(ctx.group, &o, &w);
      if (s == PG_OK) s = pg_work_wait(w, -1);
      pg_work_release(w);
    }
    const int failures = ctx.report.failures();
    ctx.report.expect(s == PG_OK, "rank " + std::to_string(ctx.rank) + ": barrier round " +
                                      std::to_string(round) + ": " + pg_status_name(s) + ": " +
                                      pg_last_error());
    for (int r = 0; r < ctx.size; ++r) {
      const std::string path =
          ctx.dir + "/barrier" + std::to_string(round) + "_" + std::to_string(r);
      ctx.report.expect(std::filesystem::exists(path), "rank " + std::to_string(ctx.rank) +
                                                           " left barrier round " +
                                                           std::to_string(round) + " before rank " +
                                                           std::to_string(r) + " arrived");
    }
    ctx.report.tally(PG_OP_BARRIER, PG_DTYPE_INVALID,
                     route_for(ctx.caps, PG_OP_BARRIER, PG_DTYPE_INVALID, PG_REDUCE_SUM),
                     ctx.report.failures() == failures);
  }
}

// Send/recv between collectives, all in flight: every rank posts its receive before its
// send. Neither may hold up the collectives or each other, whether the backend runs the
// collectives itself or the core emulates them over send/recv.
void between_collectives_scenario(RankContext& ctx) {
  constexpr int kRounds = 12;
  const int me = ctx.rank, next = (me + 1) % ctx.size, prev = (me + ctx.size - 1) % ctx.size;
  std::vector<std::unique_ptr<PendingCheck>> collectives;
  std::vector<Posted> posted;
  for (int k = 0; k < kRounds; ++k) {
    for (auto& c : start_mixed_cases(ctx, 3 * k, 3)) collectives.push_back(std::move(c));
    if (ctx.size == 1) continue;
    const uint32_t salt = 40 + k;
    posted.push_back(post(ctx, {prev, me, PG_DTYPE_I32, 64u + k, k, salt}, true, false));
    posted.push_back(post(ctx, {me, next, PG_DTYPE_I32, 64u + k, k, salt}, false, false));
  }
  for (size_t i = posted.size(); i-- > 0;) finish(ctx, posted[i]);
  for (auto& c : collectives) finish_case(ctx, c.get());
}

}  // namespace

void add_p2p_scenarios(std::vector<Scenario>& out) {
  out.push_back({"PointToPoint", "SendRecv", send_recv_scenario, 60, 150});
  out.push_back({"PointToPoint", "Barrier", barrier_scenario, 60, 150});
  // A hang here is a deadlock, not slowness: a shorter group timeout reports it sooner.
  out.push_back({"PointToPoint", "BetweenCollectives", between_collectives_scenario, 20, 90});
}

}  // namespace pgtest
