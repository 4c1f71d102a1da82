"""PyTorch's GPU memory per training stage (issue 18, part 3), measured to compare with
src/report/pytorch.ts (`nn-arena plan --vs-pytorch`): the first training step of each network,
run exactly as the estimate models it.

  python3 bench/torch_memory.py --out FILE.json [--only seed,S,M] [--optimizers sgd,momentum,adam]
                                [--dtypes float32,float64] [--precisions fp32,bf16,fp16] [--trace]

--only also takes the networks with ops (OPS_NETS: layernorm, rmsnorm, dropout, residual,
embedding, ops): the NnArena module of docs/ops.md (bench/export_check.py), which
src/report/pytorch.ts models (src/report/torch-ops.ts; under AMP torch-ops-amp.ts); --trace
records each stage's allocations and frees with the frames that made them (the caching
allocator's history), what that model is built from. It also takes dense networks with other
activations (ACT_NETS: act-sigmoid, act-tanh, act-gelu, act-gelu-tanh, act-silu, act-leaky-relu,
act-softplus), nn.Sequential as for S and M.

Per network, optimizer and dtype, in one process: the model is built on the CPU and moved with
.to('cuda'); a float batch and int64 labels are moved to the device; then
zero_grad(set_to_none=True), output = model(x), loss = CrossEntropyLoss()(output, labels),
loss.backward(), optimizer.step() (foreach implementations). After each stage it records
torch.cuda.memory_allocated() (allocated), max_memory_allocated() since the previous stage
(peak) and memory_reserved() (reserved), relative to a baseline.

Precisions (float32 models only): fp32 is the plain step. bf16 / fp16 follow PyTorch's AMP
recipe: the forward and the loss under torch.autocast("cuda", dtype) ("loss" is marked after the
context exits, which clears autocast's weight-cast cache), backward and step outside it; fp16 adds
a GradScaler: scaler.scale(loss).backward() ("backward": the scaler makes its scale and growth
tracker there), scaler.step(opt) and scaler.update() ("step": unscale_'s found_inf and inv_scale).
A row records whether the scaler skipped the optimizer step (inf/NaN gradients): the estimate
assumes it did not.

The baseline: a warm-up step creates the cuBLAS / cuBLASLt workspaces (allocated once through the
caching allocator and kept), then every free cached block is filled with a tensor of its exact
size, so the measured step starts from an allocator with nothing cached, as the estimate does.
Compare with: node bench/torch-memory-compare.mjs FILE.json [--md OUT.md]
"""
import argparse
import gc
import json
import sys
import time

import torch

from git_commit import head_commit  # bench/git_commit.py

NETS = {
    "seed": ([784, 10], 100),
    "S": ([784, 128, 10], 100),
    "M": ([784, 1024, 1024, 10], 256),
}
# Networks with ops (issue 48), as nn-arena normalizes them (layers, activations, one op a
# layer): the NnArena module of docs/ops.md (bench/export_check.py with_ops), its last activation
# left out as for the dense ones (CrossEntropyLoss takes the logits). One op each, then the ops
# bench's network (bench/ops.mjs).
D = {"op": "dense"}
OPS_NETS = {
    "layernorm": ([64, 128, 128, 10], ["relu", "identity", "softmax"], [D, {"op": "layernorm", "eps": 1e-5}, D], 100),
    "rmsnorm": ([64, 128, 128, 10], ["relu", "identity", "softmax"], [D, {"op": "rmsnorm", "eps": 1e-6}, D], 100),
    "dropout": ([64, 128, 128, 10], ["relu", "identity", "softmax"], [D, {"op": "dropout", "p": 0.1}, D], 100),
    "residual": ([64, 128, 128, 128, 10], ["relu", "relu", "identity", "softmax"], [D, D, {"op": "residual", "from": 1}, D], 100),
    # a residual adding a norm's float32 output to a dense layer's (16-bit under autocast) one
    "mixed-residual": ([64, 128, 128, 128, 10], ["relu", "identity", "identity", "softmax"],
                       [D, {"op": "layernorm", "eps": 1e-5}, {"op": "residual", "from": 1}, D], 100),
    "embedding": ([66, 88, 128, 10], ["identity", "relu", "softmax"],
                  [{"op": "embedding", "numeric": 64, "categorical": [{"cardinality": 10, "dim": 8}, {"cardinality": 1000, "dim": 16}]}, D, D], 100),
    "ops": ([66, 88, 256, 256, 256, 256, 256, 256, 256, 2],
            ["identity", "relu", "identity", "relu", "identity", "identity", "identity", "identity", "softmax"],
            [{"op": "embedding", "numeric": 64, "categorical": [{"cardinality": 10, "dim": 8}, {"cardinality": 1000, "dim": 16}]},
             D, {"op": "layernorm", "eps": 1e-5}, D, {"op": "dropout", "p": 0.1}, D, {"op": "residual", "from": 2},
             {"op": "rmsnorm", "eps": 1.1920928955078125e-07}, D], 512),
}
# Dense networks with other activations (nn.Sequential as for S and M): which tensor each
# activation's node saves (its input or its result) decides how long a Linear's output lives.
ACT_NETS = {
    f"act-{a}": ([64, 128, 128, 10], [a, a, "softmax"], 100)
    for a in ("sigmoid", "tanh", "gelu", "gelu-tanh", "silu", "leaky-relu", "softplus")
}
DTYPES = {"float32": torch.float32, "float64": torch.float64}
AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
OPTIMIZERS = ("sgd", "momentum", "adam")


def build(layers, dtype, ops=None, activations=None):
    from export_check import MODULES, with_ops  # bench/export_check.py: the modules docs/ops.md defines

    if ops:
        return with_ops(layers, activations[:-1] + ["identity"], ops).to(dtype)
    mods = []
    for i in range(1, len(layers)):
        mods.append(torch.nn.Linear(layers[i - 1], layers[i]))
        if i < len(layers) - 1:
            mods.append(MODULES[activations[i - 1]]() if activations else torch.nn.ReLU())
    return torch.nn.Sequential(*mods).to(dtype)


def make_optimizer(name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, foreach=True)
    if name == "momentum":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=True)
    raise SystemExit(f"unknown optimizer {name!r} (sgd, momentum, adam)")


def make_scaler():
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()  # torch < 2.3


def batch_of(layers, batch, dtype, ops=None):
    """A batch of x: uniform values, and where layer 1 is an embedding, valid indices in its
    categorical columns."""
    x = torch.rand(batch, layers[0], dtype=dtype)
    if ops and ops[0]["op"] == "embedding":
        for j, c in enumerate(ops[0]["categorical"]):
            x[:, ops[0]["numeric"] + j] = torch.randint(0, c["cardinality"], (batch,)).to(dtype)
    return x


def one_step(layers, batch, optimizer, dtype, precision, device, mark=lambda stage: None, ops=None, activations=None):
    """The step both the measurement and the warm-up run. Variables stay alive as in a training loop."""
    model_cpu = build(layers, dtype, ops, activations)
    x_cpu = batch_of(layers, batch, dtype, ops)
    labels_cpu = torch.randint(0, layers[-1], (batch,))  # int64, as MNIST loaders give
    model = model_cpu.to(device)
    mark("model")
    opt = make_optimizer(optimizer, model.parameters())
    criterion = torch.nn.CrossEntropyLoss()
    x = x_cpu.to(device)
    labels = labels_cpu.to(device)
    mark("inputs")
    opt.zero_grad(set_to_none=True)
    low = AUTOCAST[precision]
    if low is None:
        output = model(x)
        mark("forward")
        loss = criterion(output, labels)
        mark("loss")
    else:
        with torch.autocast("cuda", dtype=low):
            output = model(x)
            mark("forward")
            loss = criterion(output, labels)
        mark("loss")
    if precision == "fp16":
        scaler = make_scaler()
        scaler.scale(loss).backward()
        mark("backward")
        scaler.step(opt)
        scaler.update()
        mark("step")
        return [model, opt, x, labels, output, loss, scaler]
    loss.backward()
    mark("backward")
    opt.step()
    mark("step")
    return [model, opt, x, labels, output, loss]


SMALL_SIZE = 1 << 20  # requests up to 1 MiB come from the small pool


def fill_free_blocks(device):
    """Takes every cached free block with tensors, so that nothing cached is reused by the measured
    step. A request of at most 1 MiB goes to the small pool and one above it to the large pool, so
    a small-pool block is filled 1 MiB at a time, and a large-pool block of 1 MiB or less (which no
    large request can use) is left alone. Repeated until nothing eligible is left."""
    fillers = []
    left = None
    for _ in range(64):
        todo = []
        for seg in torch.cuda.memory_snapshot():
            if seg.get("device", 0) != device.index:
                continue
            small = seg["segment_type"] == "small"
            for b in seg["blocks"]:
                if b["state"] == "inactive" and (small or b["size"] > SMALL_SIZE):
                    todo.append(min(b["size"], SMALL_SIZE) if small else b["size"])
        if not todo or (left is not None and sum(todo) >= left):
            break  # done, or no progress (then baselineCachedFree in the JSON says what is left)
        left = sum(todo)
        for size in todo:
            fillers.append(torch.empty(size, dtype=torch.uint8, device=device))
    return fillers


def settle():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def frame_of(entry):
    """Where an allocation or free came from: the innermost frame of a bench/ file, and the
    innermost frame inside PyTorch (its op)."""
    frames = entry.get("frames", [])
    mine = next((f for f in frames if "/bench/" in f["filename"]), None)
    theirs = next((f for f in frames if "/torch/" in f["filename"]), None)
    at = lambda f: f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']}:{f['name']}" if f else ""
    return f"{at(mine)} <- {at(theirs)}"


def measure(layers, batch, optimizer, dtype_name, precision, device, keep, ops=None, activations=None, trace=False):
    settle()
    keep.extend(fill_free_blocks(device))
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated(device)
    base_reserved = torch.cuda.memory_reserved(device)
    # What is still cached and free (only large-pool blocks of 1 MiB or less should remain).
    cached_free = sum(b["size"] for s in torch.cuda.memory_snapshot() for b in s["blocks"] if b["state"] == "inactive")
    torch.cuda.reset_peak_memory_stats(device)
    stages = []

    # --trace: every allocation and free of the step (the caching allocator's history, with the
    # Python frames that made them), by stage.
    seen = 0
    if trace:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=1_000_000)

    def mark(stage):
        nonlocal seen
        torch.cuda.synchronize()
        stages.append({
            "stage": stage,
            "allocated": torch.cuda.memory_allocated(device) - base,
            "peak": torch.cuda.max_memory_allocated(device) - base,
            "reserved": torch.cuda.memory_reserved(device) - base_reserved,
        })
        if trace:
            events = torch.cuda.memory._snapshot()["device_traces"][device.index]
            stages[-1]["events"] = [[e["action"], e["size"], frame_of(e)] for e in events[seen:] if e["action"] in ("alloc", "free_requested")]
            seen = len(events)
        torch.cuda.reset_peak_memory_stats(device)

    torch.manual_seed(1)
    held = one_step(layers, batch, optimizer, DTYPES[dtype_name], precision, device, mark, ops, activations)
    if trace:
        torch.cuda.memory._record_memory_history(enabled=None)
    # GradScaler halves its scale in update() when it skipped the step (inf/NaN gradients).
    skipped = precision == "fp16" and held[-1].get_scale() < 2.0 ** 16
    del held
    settle()
    leftover = torch.cuda.memory_allocated(device) - base
    row = {"layers": layers, **({"ops": ops} if ops else {}), **({"activations": activations} if activations else {}), "batch": batch, "optimizer": optimizer, "dtype": dtype_name, "precision": precision,
           "baselineAllocated": base, "baselineCachedFree": cached_free, "leftoverAfter": leftover,
           "stages": stages}
    if precision == "fp16":
        row["scalerSkippedStep"] = skipped
    return row


def parse_list(text, valid, flag):
    items = text.split(",")
    bad = [i for i in items if i not in valid]
    if bad:
        raise SystemExit(f"torch_memory.py: {flag}: {bad[0]!r} is not one of {', '.join(valid)}")
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="seed,S,M")  # and any of OPS_NETS
    ap.add_argument("--trace", action="store_true", help="each stage's allocations and frees, with the frames that made them")
    ap.add_argument("--optimizers", default="sgd,momentum,adam")
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--precisions", default="fp32")
    a = ap.parse_args()
    names = parse_list(a.only, [*NETS, *OPS_NETS, *ACT_NETS], "--only")
    dtypes = parse_list(a.dtypes, list(DTYPES), "--dtypes")
    optimizers = parse_list(a.optimizers, OPTIMIZERS, "--optimizers")
    precisions = parse_list(a.precisions, list(AUTOCAST), "--precisions")
    # Mixed precision runs a float32 model (autocast leaves float64 alone).
    runs = [(d, p) for d in dtypes for p in precisions if p == "fp32" or d == "float32"]
    if not runs:
        raise SystemExit("torch_memory.py: --precisions bf16 / fp16 need float32 in --dtypes")
    if not torch.cuda.is_available():
        print("torch_memory.py: no CUDA device; it measures torch.cuda.memory_allocated()", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    if "bf16" in precisions and not torch.cuda.is_bf16_supported():
        raise SystemExit(f"torch_memory.py: {torch.cuda.get_device_name(device)} has no bf16 support")
    torch.backends.cuda.matmul.allow_tf32 = False
    # Warm-up: every kernel, handle and workspace the measured steps use, on this stream.
    for d, p in runs:
        for o in optimizers:
            warm = one_step([32, 16, 8], 4, o, DTYPES[d], p, device)
            del warm
            for name in names:  # the ops' and activations' kernels too, at a small batch
                if name in OPS_NETS or name in ACT_NETS:
                    layers, activations, ops = OPS_NETS[name][:3] if name in OPS_NETS else (*ACT_NETS[name][:2], None)
                    warm = one_step(layers, 4, o, DTYPES[d], p, device, ops=ops, activations=activations)
                    del warm
    settle()
    workspace = torch.cuda.memory_allocated(device)
    keep = []
    rows = []
    for name in names:
        if name in OPS_NETS:
            layers, activations, ops, batch = OPS_NETS[name]
        elif name in ACT_NETS:
            (layers, activations, batch), ops = ACT_NETS[name], None
        else:
            layers, activations, ops, batch = NETS[name][0], None, None, NETS[name][1]
        for d, p in runs:
            for o in optimizers:
                r = measure(layers, batch, o, d, p, device, keep, ops, activations, a.trace)
                r["network"] = name
                rows.append(r)
                print(f"{name:4} {'-'.join(map(str, layers)):18} {o:8} {d}{'' if p == 'fp32' else ' ' + p}: " +
                      "  ".join(f"{s['stage']} {s['allocated']:,}/{s['peak']:,}" for s in r["stages"]) +
                      (f"  LEFTOVER {r['leftoverAfter']:,}" if r["leftoverAfter"] else "") +
                      ("  SCALER SKIPPED THE STEP" if r.get("scalerSkippedStep") else ""), flush=True)
    info = {"machine": torch.cuda.get_device_name(device), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": head_commit(), "command": " ".join(["python3", "bench/torch_memory.py", *sys.argv[1:]]),
            "torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(device),
            "workspaceBytes": workspace, "rows": rows}
    with open(a.out, "w") as f:
        json.dump(info, f, indent=2)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
