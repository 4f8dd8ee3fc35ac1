#!/usr/bin/env bash
# Why every exception procgroup_torch throws kills torch 2.11 (SIGSEGV), while torch's own
# errors through the same backend (e.g. "does not implement startCoalescing") arrive as
# RuntimeError: seen on the GPU machine on 2026-11-26, not yet explained. Each case below
# separates one suspect; run on the GPU machine after tests/torch/device_run.sh built the
# extension (/tmp/pgpy):  bash tests/torch/device_exception_probe.sh   (carry .device)
# The leading suspect is a std::string ABI mismatch between the extension and libc10
# (TORCH_CHECK with a built message calls c10::detail::torchCheckFail(..., const std::string&)).
set -u
# Unpacked already when scripts/device_check.sh runs this (unpacking again under running
# tests crashes them).
if [ -z "${PG_BUILD:-}" ]; then source .device/env.sh || exit 1; fi
probe() {  # name, then python code
  local name=$1; shift
  timeout 120 python3 -X faulthandler -c "$@" > "/tmp/probe-$name.log" 2>&1
  echo "== $name rc=$? $(grep -m1 -E 'raised|Segmentation|Error' "/tmp/probe-$name.log")"
}
python3 -c 'import torch; print("torch", torch.__version__, "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)'
echo "== torchCheckFail as the extension and libc10 name it:"
nm -D /tmp/pgpy/procgroup_torch/_C.so | grep -i torchcheckfail | c++filt | head -4
nm -D "$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib/libc10.so" |
  grep -i torchcheckfail | c++filt | head -4
src='
#include <torch/extension.h>
void fail(int64_t n) { TORCH_CHECK(n < 0, "probe: built message ", n); }
void fail_literal() { TORCH_CHECK(false, "probe: literal"); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("fail", &fail); m.def("fail_literal", &fail_literal); }'
call="import torch, torch.utils.cpp_extension as ce, sys
m = ce.load_inline(name=sys.argv[1], cpp_sources=[sys.argv[2]], extra_ldflags=sys.argv[3].split())
for f in (m.fail_literal, lambda: m.fail(3)):
    try: f()
    except RuntimeError as e: print('raised', str(e).splitlines()[0])"
probe torch_own 'import torch
try: torch.ones(2) + torch.ones(3)
except RuntimeError as e: print("raised", str(e)[:80])'
timeout 200 python3 -X faulthandler -c "$call" plain "$src" "" > /tmp/probe-plain.log 2>&1
echo "== plain extension rc=$? $(grep -E 'raised|Segmentation' /tmp/probe-plain.log | tr '\n' ' ')"
timeout 200 python3 -X faulthandler -c "$call" withpg "$src" "-L$PG_BUILD/lib -lprocgroup -Wl,-rpath,$PG_BUILD/lib" > /tmp/probe-withpg.log 2>&1
echo "== linked with libprocgroup rc=$? $(grep -E 'raised|Segmentation' /tmp/probe-withpg.log | tr '\n' ' ')"
LD_LIBRARY_PATH=${LD_LIBRARY_PATH#/opt/pglibs:} timeout 200 python3 -X faulthandler -c "$call" nopglibs "$src" "" > /tmp/probe-nopglibs.log 2>&1
echo "== without /opt/pglibs rc=$? $(grep -E 'raised|Segmentation' /tmp/probe-nopglibs.log | tr '\n' ' ')"
