#include "core/backend_transport.h"

#include "common/dtype.h"
#include "core/group.h"
#include "core/plugin_call.h"

namespace procgroup::detail {
namespace {

class BackendIo final : public PendingIo {
 public:
  BackendIo(const Plugin& plugin, pg_backend_work_t work, Deadline deadline, std::string what)
      : plugin_(plugin), work_(work), deadline_(deadline), what_(std::move(what)) {}
  ~BackendIo() override { plugin_.ops->work_release(work_); }

  Status wait() override {
    for (;;) {
      Status status = call_plugin(plugin_.name, "work_wait", [&] {
        return plugin_.ops->work_wait(work_, deadline_.remaining(Millis(100)).count());
      });
      if (status.code() != PG_PENDING) return status.with_context(what_);
      if (deadline_.expired())
        return make_error(PG_ERR_TIMEOUT, "{}: not completed before the deadline", what_);
    }
  }

 private:
  const Plugin& plugin_;
  pg_backend_work_t work_;
  Deadline deadline_;
  std::string what_;
};

}  // namespace

int BackendTransport::rank() const { return group_.rank(); }
int BackendTransport::size() const { return group_.size(); }

Result<Request> BackendTransport::isend(int peer, const void* data, size_t bytes, uint64_t tag) {
  // The backend reads, never writes, a send's input.
  return post(PG_OP_SEND, peer, const_cast<void*>(data), bytes, tag);
}

Result<Request> BackendTransport::irecv(int peer, void* data, size_t bytes, uint64_t tag) {
  return post(PG_OP_RECV, peer, data, bytes, tag);
}

Result<Request> BackendTransport::post(pg_op_t op, int peer, void* data, size_t bytes,
                                       uint64_t tag) {
  const Plugin& plugin = group_.plugin();
  pg_backend_op_t request{};
  request.struct_size = sizeof(request);
  request.op = op;
  request.peer = peer;
  request.tag = tag;
  request.seq = seq_;
  request.timeout_ms = deadline_.remaining(Millis(INT64_MAX / 2)).count();
  pg_buffer_t buffer = PG_BUFFER_INIT;
  buffer.data = data;
  buffer.count = bytes;
  buffer.dtype = PG_DTYPE_U8;
  (op == PG_OP_SEND ? request.input : request.output) = buffer;
  request.block_count = bytes;  // the plan of a send/recv: its buffer's count, never in place
  pg_backend_op_fn entry = kit::table_entry(*plugin.ops, op);
  pg_backend_work_t work = nullptr;
  Status status = call_plugin(plugin.name, op_name(op),
                              [&] { return entry(group_.backend_group(), &request, &work); });
  std::string what = fmt::format("{} of {} bytes {} rank {} (tag {:#x})", op_name(op), bytes,
                                 op == PG_OP_SEND ? "to" : "from", peer, tag);
  if (!status.ok()) return status.with_context(what);
  return Request(std::make_unique<BackendIo>(plugin, work, deadline_, std::move(what)));
}

}  // namespace procgroup::detail
