#!/usr/bin/env bash
# Installs the Debian packages in scripts/packages.txt (skipped when all are present),
# then configures and builds procgroup into build/ with the default preset: the given
# targets only (scripts/main.sh: what the main job runs), or everything without arguments
# (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t packages < <(grep -v '^#' scripts/packages.txt | grep -v '^$')
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake --preset default
if (($#)); then
  cmake --build --preset default --target "$@"
else
  cmake --build --preset default
fi
