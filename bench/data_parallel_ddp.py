# data_parallel_ddp.py: PyTorch DistributedDataParallel on the nets of bench/data-parallel.mjs (the
# same layers, per-GPU batch, ReLU hidden layers, cross-entropy, SGD lr 1e-3), as its users run it:
# one process per GPU, NCCL, gradient_as_bucket_view, the fused SGD step, the data set on the GPU.
# A step is the wall clock of K steps (after a warm-up) over K. Precisions: fp32 (tf32 off), tf32
# (matmuls in TF32), bf16 (autocast, fp32 master weights and gradients).
#   python3 -m torch.distributed.run --nproc_per_node N bench/data_parallel_ddp.py [--nets M,L] [--precisions fp32,tf32,bf16] [--json FILE]
# Rank 0 prints one line a row and writes FILE. With N = 1 it is the one-GPU baseline (DDP of one
# process: the same step, no reduction).
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from torch_ref import model_of  # the step benchmark's nets: Linear + ReLU, on the current device

NETS = {'S': ([784, 128, 10], 100), 'M': ([784, 1024, 1024, 10], 256), 'L': ([4096, 4096, 4096, 4096], 2048)}

p = argparse.ArgumentParser()
p.add_argument('--nets', default='M,L')
p.add_argument('--precisions', default='fp32,tf32,bf16')
p.add_argument('--steps', type=int, default=0, help='timed steps (default: L 50, others 500)')
p.add_argument('--json')
a = p.parse_args()

rank = int(os.environ.get('RANK', '0'))
world = int(os.environ.get('WORLD_SIZE', '1'))
local = int(os.environ.get('LOCAL_RANK', '0'))
torch.cuda.set_device(local)
dist.init_process_group('nccl', device_id=torch.device('cuda', local))
dev = torch.device('cuda', local)


def measure(net, precision):
    layers, batch = NETS[net]
    steps = a.steps or (50 if net == 'L' else 500)
    torch.backends.cuda.matmul.allow_tf32 = precision == 'tf32'
    torch.backends.cudnn.allow_tf32 = precision == 'tf32'
    torch.manual_seed(1)
    model = DDP(model_of(layers), device_ids=[local], gradient_as_bucket_view=True)  # cuda: this rank's device (set_device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, fused=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    per_epoch = 10 if net == 'L' else 100
    x = torch.rand(per_epoch * batch, layers[0], device=dev)
    y = torch.randint(0, layers[-1], (per_epoch * batch,), device=dev)

    def step(i):
        k = i % per_epoch
        xb, yb = x[k * batch:(k + 1) * batch], y[k * batch:(k + 1) * batch]
        opt.zero_grad(set_to_none=True)
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=precision == 'bf16'):
            loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()

    for i in range(20):
        step(i)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) * 1e6 / steps
    # The group's step is its slowest rank's.
    t = torch.tensor([us], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return {'net': net, 'precision': precision, 'layers': layers, 'perGpuBatch': batch, 'devices': world, 'steps': steps, 'usPerStep': t.item(),
            'samplesPerSecond': batch * world * 1e6 / t.item()}


rows = []
for net in a.nets.split(','):
    for precision in a.precisions.split(','):
        r = measure(net, precision)
        rows.append(r)
        if rank == 0:
            print(f"torch DDP x{world} {net} {precision}: {r['usPerStep']:.1f} us a step ({r['samplesPerSecond']:.0f} samples/s)", flush=True)
if rank == 0 and a.json:
    with open(a.json, 'w') as f:
        json.dump({'benchmark': 'data-parallel-ddp', 'torch': torch.__version__, 'device': torch.cuda.get_device_name(), 'nccl': '.'.join(map(str, torch.cuda.nccl.version())),
                   'devices': world, 'rows': rows}, f, indent=2)
dist.destroy_process_group()
