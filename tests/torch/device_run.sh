#!/usr/bin/env bash
# The torch tests on the GPU machine the `device` tool lends (torch 2.x from pip there, none
# of our Debian packages): builds integrations/torch against that machine's torch with
# torch.utils.cpp_extension and the packed libprocgroup, then runs tests/torch and the DDP
# benchmark, each bounded. Logs go to $OUT (or /tmp/torch-device). Usage, from the root:
#   here:    mv build/python /tmp/pgpython && ../shared/tools/device_pack.sh build;
#            mv /tmp/pgpython build/python   (build/python's 1.13 extension links libtorch,
#            which the pack would otherwise copy whole: 120 MiB instead of 34)
#   device:  bash tests/torch/device_run.sh [all|cpu|cuda]     (carry .device)
# `cpu` builds the extension and runs the tests on CPU tensors, `cuda` only the CUDA tests
# (after a `cpu` run built the extension), so the GPU can be kept free while it is timed.
set -u
part=${1:-all}
# Unpacked already when scripts/device_check.sh runs this (unpacking again under running
# tests crashes them).
if [ -z "${PG_BUILD:-}" ]; then source .device/env.sh || exit 1; fi
root=$PWD out=${OUT:-/tmp/torch-device} py=/tmp/pgpy
mkdir -p "$out" "$py/procgroup_torch" /tmp/pgext
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.device_count())'
start=$SECONDS
# The system g++, whose libstdc++ is the one Python loads: the compiler the device names in
# CXX (/opt/gcc/bin/g++) emits libstdc++ code into the extension that crashes (SIGSEGV) in
# std::ostream::operator<<(long) against that runtime, i.e. in every TORCH_CHECK that
# formats a number (device_exception_probe.sh). PG_TORCH_CXX overrides it.
export CXX=${PG_TORCH_CXX:-/usr/bin/g++}
if [ "$part" != cuda ]; then
MAX_JOBS=16 timeout 150 python3 - "$root" "$PG_BUILD" "$py" <<'PY' 2>&1 | tail -40
import glob, shutil, sys, torch.utils.cpp_extension as ce
root, build, py = sys.argv[1:]
srcs = [f"{root}/integrations/torch/src/{f}" for f in
        ["coalescing.cc", "module.cc", "process_group.cc", "tensors.cc", "torch_store.cc",
         "work.cc"]]
ce.load(name="_C", sources=srcs, extra_include_paths=[f"{root}/api/include"],
        extra_cflags=["-O2", "-Wall"],
        extra_ldflags=[f"-L{build}/lib", "-lprocgroup", f"-Wl,-rpath,{build}/lib"],
        build_directory="/tmp/pgext", is_python_module=True)
shutil.copy(glob.glob("/tmp/pgext/_C*.so")[0], f"{py}/procgroup_torch/_C.so")
PY
echo "== build took $((SECONDS - start)) s"
fi
ver=$(python3 -c 'import torch; print(torch.__version__)')
sed "s/@Torch_VERSION@/$ver/" integrations/torch/procgroup_torch/__init__.py \
  > "$py/procgroup_torch/__init__.py"
export PYTHONPATH=$py:$root/tests/torch PROCGROUP_PLUGIN_PATH=
run() {  # name seconds command...; PG_DEVICE_ONLY="name ..." runs only those
  local name=$1 t=$2 s=$SECONDS rc
  [[ -z ${PG_DEVICE_ONLY:-} || " $PG_DEVICE_ONLY " == *" $name "* ]] || return 0
  shift 2
  timeout "$t" "$@" > "$out/$name.log" 2>&1
  rc=$?
  echo "== $name rc=$rc in $((SECONDS - s)) s"
  tail -4 "$out/$name.log"
}
[ "$part" != cpu ] && run torch_cuda 90 python3 tests/torch/test_cuda.py -v
[ "$part" = cuda ] && exit 0
PROCGROUP_BACKEND=gloo run torch_collectives_gloo 80 python3 tests/torch/test_collectives.py
# 30 steps, not 100: the full test needs more than this budget (CI gives it 300 s).
PG_TORCH_DDP_STEPS=30 PROCGROUP_BACKEND=gloo run torch_ddp_gloo 120 python3 tests/torch/test_ddp.py
run torch_failures 90 python3 tests/torch/test_failures.py
PROCGROUP_BACKEND=ucx run torch_collectives_ucx 50 python3 tests/torch/test_collectives.py
# torch 2.x's own torchrun: its agent's TCPStore through procgroup's c10d client.
run torch_torchrun 100 python3 tests/torch/test_torchrun.py
run bench 110 python3 bench/torch_ddp.py --repeats 3 --sizes 8,64K,1M --markdown
echo "== total $SECONDS s"
