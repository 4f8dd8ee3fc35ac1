// A Store over a pg_store_t the caller gave pg_group_create_with_store (PyTorch's
// c10d::Store through integrations/torch, or anyone's). The callbacks' own errors keep
// their status and message; a store that breaks its contract (NULL value, bad flag) is
// PG_ERR_STORE naming the callback.
#pragma once

#include <memory>

#include "common/status.h"
#include "procgroup/procgroup.h"
#include "store/store.h"

namespace procgroup::detail {

// Checks that every required callback is set; the copy is what the Store calls.
Result<std::shared_ptr<Store>> make_user_store(const pg_store_t& store);

}  // namespace procgroup::detail
