"""PyTorch loads nn-arena's safetensors export (issue 31). Runs bench/export_check.mjs (nn-arena
trains small networks on the CPU and writes model.safetensors files plus inputs and its predict()
outputs), then for each network builds the torch.nn.Sequential its metadata names (Linear at
index 2*(l-1), the activation module after it: src/export/sequential.ts; with ops, the NnArena
module of docs/ops.md: Embeddings, LayerNorm, RMSNorm, Dropout or Residual at that index), loads the file with
load_state_dict(strict=True) and reproduces nn-arena's outputs: float32 within 1e-6, float64
within 1e-12, on the CPU and on CUDA when there is one (TF32 off). The file is read by the
`safetensors` package when installed, and always by a minimal reader below (8-byte header
length, JSON header, raw little-endian tensors).

  npx tsup && python3 bench/export_check.py [--out bench/results/export_check.json]

Writes a JSON result: the machine, date, commit and command, torch version, devices, per network
and device the largest |difference|, and ok. Exit status 1 when any check fails.
"""
import argparse
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time

import torch

from git_commit import head_commit  # bench/git_commit.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"F32": torch.float32, "F64": torch.float64}
TOLERANCE = {"float32": 1e-6, "float64": 1e-12}
MODULES = {
    "identity": lambda: torch.nn.Identity(),
    "relu": lambda: torch.nn.ReLU(),
    "sigmoid": lambda: torch.nn.Sigmoid(),
    "tanh": lambda: torch.nn.Tanh(),
    "softmax": lambda: torch.nn.Softmax(dim=1),
    "gelu": lambda: torch.nn.GELU(),
    "gelu-tanh": lambda: torch.nn.GELU(approximate="tanh"),
    "silu": lambda: torch.nn.SiLU(),
    "leaky-relu": lambda: torch.nn.LeakyReLU(negative_slope=0.01),  # the cases use the default slope
    "softplus": lambda: torch.nn.Softplus(),
}


def read_minimal(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        raw = bytearray(data[8 + n + b : 8 + n + e])
        tensors[name] = torch.frombuffer(raw, dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).clone()
    return tensors, meta


def read_package(path):
    try:
        from safetensors.torch import load_file
        from safetensors import safe_open
    except ImportError:
        return None
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
    return load_file(path), meta


def sequential(layers, activations):
    mods = []
    for l in range(1, len(layers)):
        mods += [torch.nn.Linear(layers[l - 1], layers[l]), MODULES[activations[l - 1]]()]
    return torch.nn.Sequential(*mods)


# The module of a network with ops, as docs/ops.md defines it (the safetensors names are its
# state_dict names): an nn.Sequential of (layer, activation) pairs whose forward adds a Residual's
# earlier output.
class Residual(torch.nn.Module):
    def __init__(self, source):
        super().__init__()
        self.source = source


class Embeddings(torch.nn.Module):
    def __init__(self, numeric, columns):
        super().__init__()
        self.numeric = numeric
        self.tables = torch.nn.ModuleList(torch.nn.Embedding(c, d) for c, d in columns)

    def forward(self, x):
        idx = x[:, self.numeric:].long()
        return torch.cat([x[:, :self.numeric]] + [t(idx[:, j]) for j, t in enumerate(self.tables)], dim=1)


class NnArena(torch.nn.Sequential):
    def forward(self, x):
        outs = [x]
        for i in range(0, len(self), 2):
            layer, act = self[i], self[i + 1]
            x = act(x + outs[layer.source] if isinstance(layer, Residual) else layer(x))
            outs.append(x)
        return x


class RMSNormCompat(torch.nn.Module):
    """nn.RMSNorm's arithmetic and state_dict (weight) where PyTorch is older than 2.4."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def with_ops(layers, activations, ops):
    mods = []
    for l in range(1, len(layers)):
        o, n = ops[l - 1], layers[l]
        if o["op"] == "dense":
            m = torch.nn.Linear(layers[l - 1], n)
        elif o["op"] == "layernorm":
            m = torch.nn.LayerNorm(n, eps=o["eps"])
        elif o["op"] == "rmsnorm":
            m = torch.nn.RMSNorm(n, eps=o["eps"]) if hasattr(torch.nn, "RMSNorm") else RMSNormCompat(n, o["eps"])
        elif o["op"] == "dropout":
            m = torch.nn.Dropout(o["p"])
        elif o["op"] == "alpha-dropout":
            m = torch.nn.AlphaDropout(o["p"])
        elif o["op"] == "embedding":
            m = Embeddings(o["numeric"], [(c["cardinality"], c["dim"]) for c in o["categorical"]])
        elif o["op"] == "residual":
            m = Residual(o["from"])
        else:
            raise SystemExit(f"export_check.py: layer {l}'s op {o['op']!r} has no PyTorch module here")
        mods += [m, MODULES[activations[l - 1]]()]
    return NnArena(*mods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "export_check.json"))
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["node", os.path.join(ROOT, "bench", "export_check.mjs"), d], check=True, cwd=ROOT)
        with open(os.path.join(d, "cases.json")) as f:
            cases = json.load(f)
        for c in cases:
            path = os.path.join(d, c["file"])
            readers = [("minimal", read_minimal(path))]
            pkg = read_package(path)
            if pkg is not None:
                readers.append(("safetensors", pkg))
            for reader, (state, meta) in readers:
                layers = [int(v) for v in meta["nn_arena_layers"].split(",")]
                activations = meta["nn_arena_activations"].split(",")
                assert layers == c["layers"] and activations == c["activations"], (layers, activations)
                dtype = DTYPES["F64" if c["dtype"] == "float64" else "F32"]
                for device in devices:
                    ops = json.loads(meta["nn_arena_ops"]) if "nn_arena_ops" in meta else None
                    model = (with_ops(layers, activations, ops) if ops else sequential(layers, activations)).to(dtype)
                    model.load_state_dict(state, strict=True)
                    model = model.to(device).eval()
                    x = torch.tensor(c["x"], dtype=dtype).reshape(c["rows"], layers[0]).to(device)
                    with torch.no_grad():
                        out = model(x).cpu().reshape(-1)
                    ref = torch.tensor(c["predict"], dtype=dtype)
                    diff = float((out - ref).abs().max())
                    ok = diff <= TOLERANCE[c["dtype"]]
                    rows.append({"network": c["name"], "layers": layers, "activations": activations, "dtype": c["dtype"], "reader": reader,
                                 "device": device, "sequential": meta.get("nn_arena_sequential"), "maxAbsDiff": diff,
                                 "tolerance": TOLERANCE[c["dtype"]], "ok": ok})
                    print(f"{c['name']:16s} {reader:11s} {device:4s} max |torch - nn-arena| = {diff:.3e} {'ok' if ok else 'FAIL'}")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    result = {"machine": gpu or f"{os.cpu_count()}-core {platform.processor() or platform.machine()} (CPU only)",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": head_commit(),
              "command": " ".join(["python3", "bench/export_check.py", *sys.argv[1:]]),
              "torch": torch.__version__, "cuda": gpu, "ok": all(r["ok"] for r in rows), "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: {'all ok' if result['ok'] else 'FAILED'}")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
