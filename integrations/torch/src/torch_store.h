// A pg_store_t over the c10d::Store that torch hands a backend (a PrefixStore over the job's
// TCPStore, FileStore or HashStore), so procgroup rendezvous through torch's own store and
// binds no second port. torch's exceptions become PG_ERR_TIMEOUT or PG_ERR_STORE with
// torch's words, kept per thread for pg_store_t.error_message.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "procgroup/procgroup.h"

namespace procgroup::torch_backend {

class TorchStore {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store);
  TorchStore(const TorchStore&) = delete;
  TorchStore& operator=(const TorchStore&) = delete;

  // Valid while this object lives: procgroup groups created on it must be destroyed first.
  const pg_store_t* c_store() const { return &c_store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  pg_store_t c_store_;
};

}  // namespace procgroup::torch_backend
