#!/usr/bin/env bash
# Which ways of raising an error from a C++ extension survive torch 2.11 on the GPU machine.
# Found on 2026-11-27 (H100, torch 2.11.0+cu130 in /opt/torch/.venv): an extension compiled
# by the device's CXX=/opt/gcc/bin/g++ dies with SIGSEGV in std::ostream::_M_insert<long>
# (that compiler puts libstdc++ code into the extension which the loaded libstdc++ does not
# match), so every TORCH_CHECK that formats a number crashed, while literal messages,
# std::string messages and std::runtime_error arrived as RuntimeError. Built by the system
# /usr/bin/g++ the same code raises normally; tests/torch/device_run.sh builds with it. Each
# form runs once, in its own process, with a SIGSEGV handler that prints the native stack:
#   bash tests/torch/device_exception_probe.sh      (on the device; needs only torch)
set -u
dir=/tmp/pgprobe
mkdir -p "$dir"
python3 - <<'PY'
import sys, torch
print("torch", torch.__version__, "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI,
      "pybind11 abi", getattr(torch._C, "_PYBIND11_BUILD_ABI", "?"),
      getattr(torch._C, "_PYBIND11_COMPILER_TYPE", "?"), getattr(torch._C, "_PYBIND11_STDLIB", "?"))
try:
    import pybind11; print("pip pybind11", pybind11.__version__, pybind11.get_include())
except ImportError:
    print("no pip pybind11")
PY
g++ --version | head -1
cat > "$dir/probe.cpp" <<'CPP'
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>
#include <torch/extension.h>
#include <stdexcept>
#include <string>
static void on_segv(int) {
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  _exit(139);
}
void install() { signal(SIGSEGV, on_segv); }
void built(int64_t n) { TORCH_CHECK(n < 0, "probe: built message ", n); }
void string_arg() { std::string s = "probe: one std::string argument"; TORCH_CHECK(false, s); }
void c_str_arg() { std::string s = "probe: one c_str argument"; TORCH_CHECK(false, s.c_str()); }
void runtime_error() { throw std::runtime_error("probe: std::runtime_error " + std::to_string(3)); }
void not_implemented() {
  std::string s = "probe: not implemented";
  TORCH_CHECK_NOT_IMPLEMENTED(false, s.c_str());
}
void literal() { TORCH_CHECK(false, "probe: literal"); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install", &install);
  m.def("built", &built);
  m.def("string_arg", &string_arg);
  m.def("c_str_arg", &c_str_arg);
  m.def("runtime_error", &runtime_error);
  m.def("not_implemented", &not_implemented);
  m.def("literal", &literal);
}
CPP
# Builds (or loads the built) probe: python3 -c "$load" NAME BUILD_DIR [verbose]
load='import sys, torch.utils.cpp_extension as ce
m = ce.load(name=sys.argv[1], sources=[sys.argv[2] + "/../probe.cpp"], build_directory=sys.argv[2],
            verbose=sys.argv[3:] == ["verbose"])'
try_form() {  # seconds, form, then the load arguments
  local seconds=$1 form=$2; shift 2
  timeout "$seconds" python3 -c "$load
m.install()
try: m.$form(3) if '$form' == 'built' else m.$form()
except Exception as e: print('raised', type(e).__name__, str(e).splitlines()[0])" "$@"
}
mkdir -p "$dir/default" "$dir/system"
timeout 150 python3 -c "$load" pgprobe "$dir/default" verbose > "$dir/build.log" 2>&1
echo "== build rc=$?"
grep -E '^\[|c\+\+|g\+\+' "$dir/build.log" | head -3 | cut -c1-600
for form in literal built string_arg c_str_arg runtime_error not_implemented; do
  try_form 60 "$form" pgprobe "$dir/default" > "$dir/$form.log" 2>&1
  echo "== $form rc=$? $(grep -m1 raised "$dir/$form.log")"
  grep -q raised "$dir/$form.log" || head -30 "$dir/$form.log"
done
# The same extension built by the system g++ (its libstdc++ is the one loaded at run time).
CXX=/usr/bin/g++ try_form 150 built pgprobe_system "$dir/system" > "$dir/system.log" 2>&1
echo "== built, by /usr/bin/g++: rc=$? $(grep -m1 raised "$dir/system.log")"
