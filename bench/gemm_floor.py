"""The GEMM floor of one training step (issue 29): the products of a step alone, through cuBLAS
(torch.matmul into preallocated outputs), captured in one CUDA graph and replayed, on the GPU
machine beside bench/profile-step.mjs and bench/torch_ref.py. A step of a dense net of layers
n0..nL and batch B has 3L-1 products: L forward (B x n[l] from B x n[l-1]), L weight gradients
(n[l] x n[l-1] from B rows) and L-1 error products (B x n[l-1], the first layer's has no use).
What a step costs beyond this floor is its elementwise passes, its optimizer and its launches.

  python3 bench/gemm_floor.py [--only S,M,L] [--precisions fp32,tf32,bf16] [--out FILE.json]

bf16: bf16 operands, bf16 outputs (as autocast's). tf32: fp32 tensors with TF32 products.
Prints one line per row and writes JSON rows {network, precision, products, microsPerStep}.
"""
import argparse
import json

import torch

from torch_ref import NETS, time_step  # the step benchmark's networks; warm-up, capture, timed replays


def floor(layers, batch, precision, replays):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    dev = "cuda"
    L = len(layers) - 1
    z = [torch.randn(batch, n, device=dev, dtype=dtype) for n in layers]
    d = [torch.randn(batch, n, device=dev, dtype=dtype) for n in layers]
    w = [None] + [torch.randn(layers[l], layers[l - 1], device=dev, dtype=dtype) * 0.01 for l in range(1, L + 1)]
    dw = [None] + [torch.empty_like(w[l]) for l in range(1, L + 1)]
    zo = [None] + [torch.empty(batch, layers[l], device=dev, dtype=dtype) for l in range(1, L + 1)]
    do = [torch.empty(batch, n, device=dev, dtype=dtype) for n in layers]

    def step():
        for l in range(1, L + 1):  # forward: z[l] = z[l-1] w[l]^T
            torch.matmul(z[l - 1], w[l].t(), out=zo[l])
        for l in range(L, 0, -1):  # backward: error product (not layer 1), weight gradient
            if l > 1:
                torch.matmul(d[l], w[l], out=do[l - 1])
            torch.matmul(d[l].t(), z[l - 1], out=dw[l])

    return time_step(step, "graph", replays, 20), 3 * L - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="S,M,L")
    ap.add_argument("--precisions", default="fp32,tf32,bf16")
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for name in args.only.split(","):
        layers, batch, _ = NETS[name]
        for precision in args.precisions.split(","):
            us, products = floor(layers, batch, precision, 200 if name == "L" else 2000)
            row = {"network": name, "layers": layers, "batch": batch, "precision": precision, "products": products, "microsPerStep": us,
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__}
            print(f"{name} {precision}: {products} products, {us:.1f} us a step (graphed)")
            rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
