// Helpers for the resolve_group_config() tests: an injected environment from a map.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "rendezvous/env.h"

namespace procgroup::detail::env_testing {

using Vars = std::map<std::string, std::string>;

inline EnvLookup lookup_of(Vars vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// A minimal torchrun environment: rank 0 of 2.
inline const Vars kTwoRanks = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};

inline Vars with(Vars base, const Vars& extra) {
  for (const auto& [k, v] : extra) base[k] = v;
  return base;
}

}  // namespace procgroup::detail::env_testing
