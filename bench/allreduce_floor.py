"""The floor NCCL offers a data-parallel step: the time of one all-reduce of a network's gradients.

  python3 -m torch.distributed.run --nproc_per_node 2 bench/allreduce_floor.py [--json FILE]

Its JSON feeds `node bench/data-parallel.mjs --floor FILE` (scripts/gpu-session.sh nccl runs both in one call).

For each size (S, M, L's gradients, in bytes of fp32) and wire dtype (fp32, bf16), times
all-reduce through torch.distributed's NCCL backend in two ways: one call then a synchronize
(latency, what a step that waits for it pays, the host's launch included), 200 calls queued
back to back divided by 200 (the pipelined cost: each call's start-up overlaps the call before),
and one call's device time alone (isolated: queued behind a short sleep kernel so the host's launch
hides, timed by CUDA events around it, the ranks leaving a barrier together; median and min of 50),
which is what a step whose all-reduce nothing overlaps pays on the device. A data-parallel step
cannot take less than its compute plus the part of this it cannot overlap.
"""
import argparse, datetime, json, os, subprocess, time
import torch
import torch.distributed as dist

SIZES = {'S': 101_770 * 4, 'M': 1_863_690 * 4, 'L': 50_343_936 * 4}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--json')
    ap.add_argument('--iters', type=int, default=200)
    a = ap.parse_args()
    dist.init_process_group('nccl')
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', rank)))
    rows = []
    for net, nbytes in SIZES.items():
        for dtype in (torch.float32, torch.bfloat16):
            t = torch.ones(nbytes // 4, dtype=dtype, device='cuda')
            for _ in range(20):
                dist.all_reduce(t)
            torch.cuda.synchronize()
            lat = []
            for _ in range(50):
                dist.barrier(); torch.cuda.synchronize()
                t0 = time.perf_counter(); dist.all_reduce(t); torch.cuda.synchronize()
                lat.append(time.perf_counter() - t0)
            lat.sort()
            iso = []
            for _ in range(50):
                dist.barrier(); torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(100_000)  # about 50-100 us of device time: the launch below hides behind it
                e0.record(); dist.all_reduce(t); e1.record()
                torch.cuda.synchronize()
                iso.append(e0.elapsed_time(e1) * 1e3)
            iso.sort()
            dist.barrier(); torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                dist.all_reduce(t)
            torch.cuda.synchronize()
            piped = (time.perf_counter() - t0) / a.iters
            wire = t.numel() * t.element_size()
            row = {'net': net, 'wire': str(dtype).replace('torch.', ''), 'bytes': wire,
                   'latencyUs': lat[len(lat) // 2] * 1e6, 'pipelinedUs': piped * 1e6,
                   'isolatedUs': iso[len(iso) // 2], 'isolatedMinUs': iso[0],
                   'algBandwidthGBs': wire / piped / 1e9}
            rows.append(row)
            if rank == 0:
                print(f"all-reduce {net} {row['wire']}: {wire / 1e6:.1f} MB, latency {row['latencyUs']:.1f} us, "
                      f"pipelined {row['pipelinedUs']:.1f} us ({row['algBandwidthGBs']:.0f} GB/s), "
                      f"isolated {row['isolatedUs']:.1f} us (min {row['isolatedMinUs']:.1f})", flush=True)
    if rank == 0 and a.json:
        try:
            commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip() or None
        except OSError:
            commit = None
        world = dist.get_world_size()
        with open(a.json, 'w') as f:
            json.dump({'machine': f"{torch.cuda.get_device_name().lower().replace(' ', '-')}-x{world}", 'gpus': world,
                       'date': datetime.datetime.now(datetime.timezone.utc).isoformat(), 'commit': commit,
                       'command': f'python3 -m torch.distributed.run --nproc_per_node {world} bench/allreduce_floor.py',
                       'torch': torch.__version__, 'nccl': '.'.join(map(str, torch.cuda.nccl.version())), 'rows': rows}, f, indent=1)
    dist.destroy_process_group()

if __name__ == '__main__':
    main()
