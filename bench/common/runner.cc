// The benchmark sweep: timing, checking, reporting (see runner.h).
#include "runner.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "data.h"

namespace procgroup::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

// Page-aligned and touched once, so no timed loop pays for first-touch page faults.
Buffer allocate(uint64_t bytes) {
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  Buffer b(static_cast<std::byte*>(std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded)));
  if (!b) throw std::runtime_error("cannot allocate " + format_bytes(bytes));
  std::memset(b.get(), 0, rounded == 0 ? 4096 : rounded);
  return b;
}

class Sweep {
 public:
  Sweep(const RunInfo& info, Communicator& comm, Engine& engine, Engine* direct)
      : o_(info.options),
        comm_(comm),
        engine_(engine),
        direct_(direct),
        reporter_(info, comm.rank() == 0),
        send_(allocate(o_.max_bytes)),
        recv_(allocate(o_.max_bytes)),
        expected_(allocate(o_.check ? o_.max_bytes : 0)) {}

  int run() {
    reporter_.header();
    const auto sizes = sweep_sizes(o_.min_bytes, o_.max_bytes, o_.factor);
    for (Dtype dtype : o_.dtypes) {
      const std::vector<RedOp> redops = reduces(o_.op) ? o_.redops : std::vector{RedOp::kSum};
      for (RedOp redop : redops) {
        bool noted = false;
        for (size_t i = 0; i < sizes.size(); ++i) {
          const Layout layout = layout_for(o_.op, sizes[i], dtype_size(dtype), comm_.size());
          if (layout.count == 0) {
            if (!noted) reporter_.note(skip_note(dtype));
            noted = true;
            continue;
          }
          run_size(dtype, redop, layout, static_cast<uint32_t>(i + 1));
        }
      }
    }
    reporter_.summary();
    const bool files_ok = comm_.rank() != 0 || reporter_.write_files(o_.csv_path, o_.json_path);
    return reporter_.total_wrong() == 0 && files_ok ? 0 : 1;
  }

 private:
  std::string skip_note(Dtype dtype) const {
    return std::string("sizes with fewer than one ") + dtype_name(dtype) +
           " element per rank are skipped";
  }

  void run_size(Dtype dtype, RedOp redop, const Layout& layout, uint32_t rep) {
    const DataSpec spec{o_.op, dtype, redop, o_.root, comm_.rank(), comm_.size(), rep};
    if (o_.check) fill_expected(spec, layout, expected_.get());
    Row row{o_.op,        dtype,        std::nullopt, rooted(o_.op) ? o_.root : -1,
            layout.bytes, layout.count, {},           std::nullopt,
            std::nullopt};
    if (reduces(o_.op)) row.redop = redop;
    row.out_of_place = measure(engine_, spec, layout, false);
    if (has_in_place(o_.op)) row.in_place = measure(engine_, spec, layout, true);
    if (direct_ != nullptr) row.direct = measure(*direct_, spec, layout, false);
    reporter_.row(row);
  }

  OpCall make_call(const Engine& engine, const DataSpec& spec, const Layout& layout,
                   bool in_place) const {
    OpCall call{spec.op, spec.dtype,  spec.redop,  spec.root,
                layout,  send_.get(), recv_.get(), in_place};
    if (in_place) {
      const size_t es = dtype_size(spec.dtype);
      const uint64_t rank = static_cast<uint64_t>(spec.rank);
      call.input = recv_.get() + rank * layout.send_in_place_offset * es;
      call.output = recv_.get() + engine.in_place_output_offset(call, spec.rank) * es;
    }
    return call;
  }

  // Fresh inputs; outputs that no valid result can match (in place: poisoned first, then
  // the input written over its part).
  void fill_buffers(const DataSpec& spec, const OpCall& call) const {
    poison(call.output, call.layout.recv_count * dtype_size(spec.dtype));
    fill_input(spec, call.layout, call.input);
  }

  double aggregate(double value) {
    switch (o_.aggregate) {
      case TimeAggregate::kRank0:
        return comm_.allreduce(comm_.rank() == 0 ? value : 0.0, RedOp::kSum);
      case TimeAggregate::kAvg: return comm_.allreduce(value, RedOp::kSum) / comm_.size();
      case TimeAggregate::kMin: return comm_.allreduce(value, RedOp::kMin);
      case TimeAggregate::kMax: return comm_.allreduce(value, RedOp::kMax);
    }
    return value;
  }

  Measurement measure(Engine& engine, const DataSpec& spec, const Layout& layout, bool in_place) {
    const OpCall call = make_call(engine, spec, layout, in_place);
    fill_buffers(spec, call);
    engine.prepare(call);
    if (o_.warmup > 0) engine.run(call, o_.warmup, o_.blocking);
    comm_.barrier();
    const auto start = Clock::now();
    engine.run(call, o_.iters, o_.blocking);
    const std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
    Measurement m;
    m.time_us = aggregate(elapsed.count() / o_.iters);
    m.algbw = m.time_us > 0 ? static_cast<double>(layout.bytes) / m.time_us / 1e3 : 0.0;
    m.busbw = m.algbw * busbw_factor(spec.op, spec.nranks);
    if (o_.check) {
      fill_buffers(spec, call);
      if (o_.corrupt_rank == spec.rank) corrupt_first_element(spec.dtype, call.input);
      engine.run(call, 1, true);
      const uint64_t local =
          output_checked(spec) ? count_wrong(spec, expected_.get(), call.output, layout.recv_count)
                               : 0;
      m.wrong = comm_.sum(static_cast<int64_t>(local));
    }
    return m;
  }

  const Options& o_;
  Communicator& comm_;
  Engine& engine_;
  Engine* direct_;
  Reporter reporter_;
  Buffer send_;
  Buffer recv_;
  Buffer expected_;
};

}  // namespace

int run_benchmark(const RunInfo& info, Communicator& comm, Engine& engine, Engine* direct) {
  const Options& o = info.options;
  if (rooted(o.op) && o.root >= comm.size()) {
    throw std::invalid_argument("-r/--root " + std::to_string(o.root) + " is not a rank (" +
                                std::to_string(comm.size()) + " ranks)");
  }
  if (o.op == Coll::kSendrecv && comm.size() < 2) {
    throw std::invalid_argument("sendrecv needs at least 2 ranks");
  }
  Sweep sweep(info, comm, engine, direct);
  return sweep.run();
}

}  // namespace procgroup::bench
