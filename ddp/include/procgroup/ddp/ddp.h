// ddp.h — everything of procgroup::ddp in one include: data-parallel training on any
// procgroup backend (Reducer, broadcasts, SyncBatchNorm, DistributedSampler, checkpoints).
//
//   #include "procgroup/ddp/ddp.h"
//   namespace ddp = procgroup::ddp;
//   ddp::Reducer reducer(group, params);
#pragma once

#include "procgroup/ddp/broadcast.h"
#include "procgroup/ddp/bucket_assignment.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/comm_hook.h"
#include "procgroup/ddp/error.h"
#include "procgroup/ddp/half.h"
#include "procgroup/ddp/reducer.h"
#include "procgroup/ddp/sampler.h"
#include "procgroup/ddp/sync_batch_norm.h"
#include "procgroup/ddp/tensor.h"
