"""torch.distributed over procgroup.

    import procgroup_torch  # registers the "procgroup" backend
    torch.distributed.init_process_group("procgroup")

PROCGROUP_BACKEND picks the plugin (ucx, gloo, nccl, loopback or a path to a .so); rank,
world size, timeout and the rendezvous store are torch's. CPU tensors go to that plugin
(gloo when it names nccl), CUDA tensors to nccl unless PROCGROUP_BACKEND names another.
"""
import inspect

import torch
import torch.distributed as dist

# Filled in by CMake: the torch the extension was compiled against.
_BUILT_FOR_TORCH = "@Torch_VERSION@"

try:
    from . import _C
except ImportError as error:
    raise ImportError(
        f"procgroup_torch's extension was built for torch {_BUILT_FOR_TORCH} and does not load "
        f"into torch {torch.__version__}: rebuild integrations/torch against this torch "
        f"({error})") from error
from ._C import ProcessGroupProcgroup

__all__ = ["ProcessGroupProcgroup", "BACKEND_NAME", "plugin"]

BACKEND_NAME = "procgroup"


def _create_backend(options, _backend_options=None):
    # torch's extended API: a _DistributedBackendOptions with the group's own store, rank,
    # size and timeout, and its members' world ranks (empty for the world group).
    return ProcessGroupProcgroup(options.store, options.group_rank, options.group_size,
                                 options.timeout, list(options.global_ranks_in_group))


def plugin(group=None):
    """The procgroup plugin ("ucx", "gloo", ...) serving CPU tensors of group (default: the
    world group), which must use the "procgroup" backend."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupProcgroup):
        # torch >= 2 wraps each device's backend in a ProcessGroup.
        pg = pg._get_backend(torch.device("cpu"))
    return pg.plugin


if BACKEND_NAME.upper() not in dist.Backend._plugins:
    # torch >= 2.1 asks which devices a backend serves (one object serves both here).
    _devices = ({"devices": ["cpu", "cuda"]}
                if "devices" in inspect.signature(dist.Backend.register_backend).parameters
                else {})
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, **_devices)
