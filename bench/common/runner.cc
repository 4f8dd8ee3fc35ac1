// The benchmark sweep: timing, checking, reporting (see runner.h).
#include "runner.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "data.h"
#include "host_math.h"

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

// A Memory's allocation, released with it.
class DeviceBuffer {
 public:
  DeviceBuffer(Memory* memory, uint64_t bytes)
      : memory_(memory),
        data_(memory != nullptr ? static_cast<std::byte*>(memory->allocate(bytes)) : nullptr) {}
  ~DeviceBuffer() {
    if (memory_ != nullptr) memory_->release(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* get() const { return data_; }

 private:
  Memory* memory_;
  std::byte* data_;
};

// Every rank's host, pid and device, in rank order: one broadcast from each rank, of a record
// with fixed-size fields so every rank knows the length.
std::vector<RankPlace> gather_places(Communicator& comm, const std::string& device) {
  struct Record {
    int32_t pid;
    std::array<char, 128> host;
    std::array<char, 128> device;
  };
  Record mine{static_cast<int32_t>(getpid()), {}, {}};
  if (gethostname(mine.host.data(), mine.host.size() - 1) != 0) mine.host[0] = '?';
  std::snprintf(mine.device.data(), mine.device.size(), "%s", device.c_str());
  std::vector<RankPlace> places;
  for (int r = 0; r < comm.size(); ++r) {
    Record record = r == comm.rank() ? mine : Record{};
    if (comm.size() > 1) comm.broadcast(&record, sizeof record, r);
    record.host.back() = record.device.back() = '\0';
    places.push_back({r, record.pid, record.host.data(), record.device.data()});
  }
  return places;
}

class Sweep {
 public:
  Sweep(const RunInfo& info, Communicator& comm, Engine& engine, Engine* direct, Memory* memory)
      : o_(info.options),
        comm_(comm),
        engine_(engine),
        direct_(direct),
        memory_(memory),
        reporter_(info, comm.rank() == 0),
        send_(allocate(o_.max_bytes)),
        recv_(allocate(o_.max_bytes)),
        expected_(allocate(o_.check ? o_.max_bytes : 0)),
        device_send_(memory, o_.max_bytes),
        device_recv_(memory, o_.max_bytes) {}

  int run() {
    reporter_.set_ranks(gather_places(comm_, memory_ != nullptr ? memory_->name() : "cpu"));
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
            std::nullopt, std::nullopt};
    if (reduces(o_.op)) row.redop = redop;
    row.out_of_place = measure(engine_, spec, layout, false);
    if (has_in_place(o_.op)) row.in_place = measure(engine_, spec, layout, true);
    if (direct_ != nullptr) row.direct = measure(*direct_, spec, layout, false);
    if (o_.reference) row.reference = reference(layout.bytes);
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

  // The call the engine gets: the host call, or the same offsets into the device buffers.
  OpCall on_device(const OpCall& host) const {
    if (memory_ == nullptr) return host;
    OpCall call = host;
    call.input = device_send_.get() + (static_cast<std::byte*>(host.input) - send_.get());
    if (host.in_place) {
      call.input = device_recv_.get() + (static_cast<std::byte*>(host.input) - recv_.get());
    }
    call.output = device_recv_.get() + (static_cast<std::byte*>(host.output) - recv_.get());
    return call;
  }

  // Bytes from the receive buffer's start to the end of what the call reads or writes there.
  static uint64_t recv_extent(const OpCall& c, const std::byte* recv, size_t es) {
    uint64_t end = static_cast<const std::byte*>(c.output) - recv + c.layout.recv_count * es;
    if (c.in_place) {
      end = std::max<uint64_t>(
          end, static_cast<const std::byte*>(c.input) - recv + c.layout.send_count * es);
    }
    return end;
  }

  void upload(const OpCall& host, size_t es) const {
    if (memory_ == nullptr) return;
    if (!host.in_place)
      memory_->to_device(device_send_.get(), send_.get(), host.layout.send_count * es);
    memory_->to_device(device_recv_.get(), recv_.get(), recv_extent(host, recv_.get(), es));
  }

  void download_output(const OpCall& host, const OpCall& call, size_t es) const {
    if (memory_ != nullptr) memory_->to_host(host.output, call.output, host.layout.recv_count * es);
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

  // Microseconds for iters operations, by the engine's timer or the host clock.
  double timed_run(Engine& engine, const OpCall& call) {
    Timer* timer = engine.timer();
    if (timer != nullptr) {
      timer->start();
      engine.run(call, o_.iters, o_.blocking);
      return timer->stop_us();
    }
    const auto start = Clock::now();
    engine.run(call, o_.iters, o_.blocking);
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }

  // GB/s of bytes through kernel, every rank at once: -w warmups, a barrier, then enough
  // runs (at least -n, and kReferenceBytes in all, the same count on every rank) to time,
  // aggregated over ranks as the operations' times are.
  template <typename Kernel>
  double bandwidth(uint64_t bytes, const Kernel& kernel) {
    constexpr uint64_t kReferenceBytes = uint64_t{64} << 20;
    const uint64_t runs =
        std::max<uint64_t>(static_cast<uint64_t>(o_.iters), kReferenceBytes / bytes);
    for (int i = 0; i < o_.warmup; ++i) kernel();
    comm_.barrier();
    const auto start = Clock::now();
    for (uint64_t i = 0; i < runs; ++i) kernel();
    const auto elapsed = std::chrono::duration<double, std::micro>(Clock::now() - start);
    const double us = aggregate(elapsed.count() / static_cast<double>(runs));
    return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0.0;
  }

  // --reference: memcpy and f32 reduce-into of bytes between the host buffers (zeroed first,
  // so that no denormal slows the additions; they are refilled before every measurement).
  Reference reference(uint64_t bytes) {
    std::byte* src = send_.get();
    std::byte* dst = recv_.get();
    std::memset(src, 0, bytes);
    std::memset(dst, 0, bytes);
    Reference r;
    r.memcpy_gbps = bandwidth(bytes, [&] { std::memcpy(dst, src, bytes); });
    const uint64_t floats = bytes / sizeof(float);
    if (floats > 0) {
      r.reduce_gbps = bandwidth(floats * sizeof(float),
                                [&] { reduce_into(Dtype::kF32, RedOp::kSum, dst, src, floats); });
    }
    return r;
  }

  Measurement measure(Engine& engine, const DataSpec& spec, const Layout& layout, bool in_place) {
    const OpCall host = make_call(engine, spec, layout, in_place);
    const OpCall call = on_device(host);
    const size_t es = dtype_size(spec.dtype);
    fill_buffers(spec, host);
    upload(host, es);
    engine.prepare(call);
    if (o_.warmup > 0) engine.run(call, o_.warmup, o_.blocking);
    comm_.barrier();
    const double elapsed_us = timed_run(engine, call);
    Measurement m;
    m.time_us = aggregate(elapsed_us / o_.iters);
    m.algbw = m.time_us > 0 ? static_cast<double>(layout.bytes) / m.time_us / 1e3 : 0.0;
    m.busbw = m.algbw * busbw_factor(spec.op, spec.nranks);
    if (o_.check) {
      fill_buffers(spec, host);
      if (o_.corrupt_rank == spec.rank) corrupt_first_element(spec.dtype, host.input);
      upload(host, es);
      engine.run(call, 1, o_.blocking);  // the path timed: -z 0 issues, then waits
      download_output(host, call, es);
      const uint64_t local =
          output_checked(spec) ? count_wrong(spec, expected_.get(), host.output, layout.recv_count)
                               : 0;
      m.wrong = comm_.sum(static_cast<int64_t>(local));
    }
    return m;
  }

  const Options& o_;
  Communicator& comm_;
  Engine& engine_;
  Engine* direct_;
  Memory* memory_;
  Reporter reporter_;
  Buffer send_;
  Buffer recv_;
  Buffer expected_;
  DeviceBuffer device_send_;  // null without a Memory
  DeviceBuffer device_recv_;
};

}  // namespace

int run_benchmark(const RunInfo& info, Communicator& comm, Engine& engine, Engine* direct,
                  Memory* memory) {
  const Options& o = info.options;
  if (rooted(o.op) && o.root >= comm.size()) {
    throw std::invalid_argument("-r/--root " + std::to_string(o.root) + " is not a rank (" +
                                std::to_string(comm.size()) + " ranks)");
  }
  if (o.op == Coll::kSendrecv && comm.size() < 2) {
    throw std::invalid_argument("sendrecv needs at least 2 ranks");
  }
  Sweep sweep(info, comm, engine, direct, memory);
  return sweep.run();
}

}  // namespace procgroup::bench
