// procgroup_backend_kit.hpp — header-only C++20 kit for writing a backend plugin over
// procgroup_backend.h (which stays the whole ABI: a plugin built with the kit is an ordinary
// plugin, and a plain C plugin needs none of this). It gives:
// - backend_kit/status.hpp: kit::Status, PG_KIT_TRY / PG_KIT_CO_TRY, the exception firewall;
// - backend_kit/entry.hpp: make_ops<Group>() builds the function table from a group class,
//   host_of(config) gives a group its host services (no globals); negotiate.hpp:
//   negotiate() answers pg_backend_negotiate;
// - backend_kit/dtype.hpp, op_table.hpp and ops.hpp: dtype sizes and names, f16/bf16
//   converters, the op table, and plan_op() for the core's planned op;
// - backend_kit/kernels.hpp: the core's reduction kernels through the host services
//   (kit::reduce_to, kit::scale_down), so no plugin carries a copy;
// - backend_kit/store.hpp: kit::Store, the host store with std::string values and
//   failures as a kit::Status naming the key;
// - backend_kit/work.hpp: kit::Completion, a work's outcome set once, waited for, and the
//   core's completion notice; kit::deadline_after.
// docs/backend-interface.md ("The backend kit") shows a whole plugin written with it.
//
//   #include <procgroup/procgroup_backend_kit.hpp>
//   namespace kit = procgroup::kit;
//   constexpr pg_backend_ops_t kOps = kit::make_ops<MyGroup>(kit::kP2pOps);
#pragma once

#if !defined(__cplusplus) || __cplusplus < 202002L
#error \
    "procgroup_backend_kit.hpp needs C++20; a C plugin includes procgroup/procgroup_backend.h alone."
#else

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/backend_kit/entry.hpp"
#include "procgroup/backend_kit/kernels.hpp"
#include "procgroup/backend_kit/negotiate.hpp"
#include "procgroup/backend_kit/op_table.hpp"
#include "procgroup/backend_kit/ops.hpp"
#include "procgroup/backend_kit/status.hpp"
#include "procgroup/backend_kit/store.hpp"
#include "procgroup/backend_kit/work.hpp"

#endif
