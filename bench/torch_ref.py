"""PyTorch reference for the step benchmark (issue 5), run on the GPU machine beside
`npm run bench`: the same networks as bench/steps.ts, float32 (TF32 off unless --precisions
includes tf32: torch.backends.cuda.matmul.allow_tf32; PyTorch has no 3xTF32, so its 'fp32' rows
are the counterpart of nn-arena's tf32x3), ReLU + softmax
cross-entropy, full steps (zero_grad, forward, loss, backward, optimizer step) on tensors
already on the GPU, eager and as a captured CUDA graph, SGD and Adam. With --device cpu (issue
16): eager steps on the CPU with --threads threads (bench/cpu.ts runs it beside the CPU backend).

  python3 bench/torch_ref.py [--out FILE.json] [--only S,M,L] [--optimizers sgd,adam]
                             [--modes eager,graph] [--steps N] [--device cuda|cpu] [--threads N]
                             [--precisions fp32,tf32,bf16,fp16]
  python3 bench/torch_ref.py --models 1,8,64,256 [--modes graph] [--out FILE.json]

--models (issue 19, bench/models.mjs): K independent S networks trained together with
torch.func (stack_module_state, vmap over grad of functional_call), the full SGD step with one
learning rate per model, rows {models, mode, precision, steps, microsPerStep} (--precisions fp32,bf16:
bf16 autocast over the forward).

Prints one line per row and writes JSON rows {network, optimizer, mode, precision, steps, microsPerStep}.
"""
import argparse
import copy
import json
import os
import sys
import time

import torch

NETS = {
    "S": ([784, 128, 10], 100, 1000),
    "M": ([784, 1024, 1024, 10], 256, 1000),
    "L": ([4096, 4096, 4096, 4096], 2048, 50),
}


DEVICE = "cuda"
CPU_STEPS = {"S": 1000, "M": 100, "L": 3}


def model_of(layers):
    mods = []
    for i in range(1, len(layers)):
        mods.append(torch.nn.Linear(layers[i - 1], layers[i]))
        if i < len(layers) - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods).to(DEVICE)


def time_steps(fn, steps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / steps  # microseconds


def bench_cpu(name, optimizer, steps_override=0):
    layers, batch, _ = NETS[name]
    steps = steps_override or CPU_STEPS[name]
    torch.manual_seed(1)
    model = model_of(layers)
    lossf = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3) if optimizer == "sgd" else torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.rand(batch, layers[0])
    y = torch.randint(0, layers[-1], (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(1 if name == "L" else 10):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    us = (time.perf_counter() - start) * 1e6 / steps
    return {"network": name, "layers": layers, "batch": batch, "optimizer": optimizer, "mode": "eager",
            "steps": steps, "microsPerStep": us,
            "tflops": 6 * batch * sum(layers[i - 1] * layers[i] for i in range(1, len(layers))) / us / 1e6}


def time_step(step, mode, steps, warm, before_capture=None):
    """Microseconds per call of `step`: warmed up on a side stream (required before capture; also
    loads kernels and cuBLAS), captured as a CUDA graph in mode "graph", `warm` more runs, then timed."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(5):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    run = step
    if mode == "graph":
        if before_capture:
            before_capture()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    for _ in range(warm):
        run()
    torch.cuda.synchronize()
    return time_steps(run, steps)


def bench(name, optimizer, mode, steps_override=0, precision="fp32"):
    if DEVICE == "cpu":
        return bench_cpu(name, optimizer, steps_override)
    layers, batch, steps = NETS[name]
    steps = steps_override or steps
    torch.manual_seed(1)
    model = model_of(layers)
    lossf = torch.nn.CrossEntropyLoss()
    capturable = mode == "graph"
    # fp16: GradScaler, whose step() syncs with the host to skip an overflowed step unless the
    # optimizer takes the scale itself (fused=True): the fused optimizers, so that it graphs.
    scaled = precision == "fp16"
    opt = (torch.optim.SGD(model.parameters(), lr=1e-3, **({"fused": True} if scaled else {})) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-4, capturable=capturable, **({"fused": True} if scaled else {})))
    x = torch.rand(batch, layers[0], device="cuda")
    y = torch.randint(0, layers[-1], (batch,), device="cuda")

    # bf16 / fp16: autocast, PyTorch's mixed precision for a float32 model (fp32 parameters and
    # optimizer, 16-bit products); the cast cache is off, as graph capture requires.
    amp = precision in ("bf16", "fp16")
    dtype = torch.float16 if scaled else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if scaled else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=amp, cache_enabled=False):
            loss = lossf(model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    us = time_step(step, mode, steps, 3 if name == "L" else 20, before_capture=lambda: opt.zero_grad(set_to_none=True))
    return {"network": name, "layers": layers, "batch": batch, "optimizer": optimizer, "mode": mode,
            "steps": steps, "microsPerStep": us,
            "tflops": 6 * batch * sum(layers[i - 1] * layers[i] for i in range(1, len(layers))) / us / 1e6}


def bench_models(K, mode, steps_override=0, precision="fp32"):
    """K S networks, one torch.func step for all of them: grads by vmap(grad(functional_call)),
    then params -= lr[m] * grads (SGD, one learning rate per model), on tensors already on the GPU.
    precision bf16: the forward under torch.autocast(bfloat16), fp32 parameters and update."""
    from torch.func import functional_call, grad, stack_module_state, vmap
    layers, batch, steps = NETS["S"]
    steps = steps_override or steps
    torch.manual_seed(1)
    models = [model_of(layers) for _ in range(K)]
    params, buffers = stack_module_state(models)
    params = {k: v.detach() for k, v in params.items()}
    base = copy.deepcopy(models[0]).to("meta")

    def loss_of(p, b, x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = functional_call(base, (p, b), (x,))
        return torch.nn.functional.cross_entropy(logits.float(), y)

    grads_of = vmap(grad(loss_of), in_dims=(0, 0, None, None))
    lrs = torch.linspace(1e-3, 1e-2, K, device="cuda")
    shaped = {k: lrs.view(-1, *([1] * (v.dim() - 1))) for k, v in params.items()}
    x = torch.rand(batch, layers[0], device="cuda")
    y = torch.randint(0, layers[-1], (batch,), device="cuda")

    def step():
        g = grads_of(params, buffers, x, y)
        with torch.no_grad():
            for k, v in params.items():
                v.sub_(shaped[k] * g[k])

    us = time_step(step, mode, steps, 20)
    return {"network": "S", "layers": layers, "batch": batch, "optimizer": "sgd", "models": K, "mode": mode, "precision": precision,
            "steps": steps, "microsPerStep": us,
            "tflops": 6 * batch * K * sum(layers[i - 1] * layers[i] for i in range(1, len(layers))) / us / 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--only", default="S,M,L")
    ap.add_argument("--optimizers", default="sgd,adam")
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: 1000, 50 for L); small for a profiler")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: all cores)")
    ap.add_argument("--precisions", default="fp32", help="fp32 (TF32 off), tf32 (TF32 matmuls), bf16 (autocast), fp16 (autocast + GradScaler, fused optimizers), comma-separated")
    ap.add_argument("--models", default="", help="K list: the torch.func reference of K S networks (bench/models.mjs)")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    if DEVICE == "cpu":
        torch.set_num_threads(a.threads or os.cpu_count())
        a.modes = "eager"
    precisions = a.precisions.split(",")
    if any(p not in ("fp32", "tf32", "bf16", "fp16") for p in precisions):
        ap.error("--precisions takes fp32, tf32, bf16 and fp16 (PyTorch has no 3xTF32)")
    if DEVICE == "cpu":
        precisions = ["fp32"]
    rows = []
    if a.models:
        for K in [int(k) for k in a.models.split(",")]:
            for mode in (a.modes if a.modes != "eager,graph" else "graph").split(","):
                for precision in [p for p in precisions if p in ("fp32", "bf16")]:
                    r = bench_models(K, mode, a.steps, precision)
                    rows.append(r)
                    print(f"torch.func cuda S x{K} sgd {precision} {mode:5}: {r['microsPerStep']:10.1f} us/step {r['tflops']:7.3f} TFLOP/s", flush=True)
        a.only = ""
    for precision in precisions:
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        for name in filter(None, a.only.split(",")):
            for optimizer in a.optimizers.split(","):
                for mode in a.modes.split(","):
                    try:
                        r = bench(name, optimizer, mode, a.steps, precision)
                    except RuntimeError as e:  # e.g. a capture PyTorch refuses: said, and the other rows still run
                        print(f"torch {DEVICE} {precision} {name} {optimizer:4} {mode:5}: failed: {str(e).splitlines()[0]}", flush=True)
                        rows.append({"network": name, "optimizer": optimizer, "mode": mode, "precision": precision, "error": str(e).splitlines()[0]})
                        continue
                    r["precision"] = precision
                    rows.append(r)
                    print(f"torch {DEVICE} {precision} {name} {optimizer:4} {mode:5}: {r['microsPerStep']:10.1f} us/step {r['tflops']:7.3f} TFLOP/s", flush=True)
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else f"cpu, {torch.get_num_threads()} threads",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(info, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
