# ops_torch.py: PyTorch training the network of bench/ops.mjs (nn.Embedding of two categorical
# columns after 64 numeric ones, Linear + ReLU, nn.LayerNorm, nn.Dropout, a residual addition,
# nn.RMSNorm; batch 512; AdamW, fused on CUDA), timed the same
# way: the wall clock around E epochs (synchronised), data set on the device, a new shuffle each
# epoch; precisions fp32, tf32 (TF32 matmuls on) and bf16 (autocast). Eager as most users write
# it, and a captured CUDA graph of the whole step (static batch buffers filled by index_select
# inside the graph, capturable fused AdamW): its best.
# On a machine without CUDA: eager on the CPU (torch.set_num_threads follows the cores).
#   python3 bench/ops_torch.py [--samples 65536] [--epochs 5] [--precisions fp32,tf32,bf16] [--json out.json]
import argparse, json, time
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument('--samples', type=int, default=65536)
p.add_argument('--epochs', type=int, default=5)
p.add_argument('--precisions', default='fp32,tf32' if torch.cuda.is_available() else 'fp32')
p.add_argument('--json')
a = p.parse_args()
dev = 'cuda' if torch.cuda.is_available() else 'cpu'
BATCH = 512


class RMSNorm(torch.nn.Module):
    """nn.RMSNorm's arithmetic for PyTorch older than 2.4 (no nn.RMSNorm), e.g. a distribution's CPU build."""

    def __init__(self, n, eps=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e0 = torch.nn.Embedding(10, 8)
        self.e1 = torch.nn.Embedding(1000, 16)
        self.l1 = torch.nn.Linear(88, 256)
        self.ln = torch.nn.LayerNorm(256, eps=1e-5)
        self.l3 = torch.nn.Linear(256, 256)
        self.drop = torch.nn.Dropout(0.1)
        self.l5 = torch.nn.Linear(256, 256)
        self.rms = torch.nn.RMSNorm(256) if hasattr(torch.nn, 'RMSNorm') else RMSNorm(256)
        self.out = torch.nn.Linear(256, 2)

    def forward(self, x):
        idx = x[:, 64:].long()
        z1 = F.relu(self.l1(torch.cat([x[:, :64], self.e0(idx[:, 0]), self.e1(idx[:, 1])], dim=1)))
        z3 = F.relu(self.l3(self.ln(z1)))
        z6 = self.l5(self.drop(z3)) + z1
        return self.out(self.rms(z6))


def sync():
    if dev == 'cuda':
        torch.cuda.synchronize()


g = torch.Generator().manual_seed(1)
X = torch.cat([torch.rand(a.samples, 64, generator=g) - 0.5, torch.randint(0, 10, (a.samples, 1), generator=g).float(),
               torch.randint(0, 1000, (a.samples, 1), generator=g).float()], dim=1).to(dev)
Y = torch.randint(0, 2, (a.samples,), generator=g).to(dev)
steps_per_epoch = (a.samples + BATCH - 1) // BATCH
rows = []
for precision in a.precisions.split(','):
    torch.backends.cuda.matmul.allow_tf32 = precision == 'tf32'
    torch.backends.cudnn.allow_tf32 = precision == 'tf32'
    for mode in ['eager', 'graphed'] if dev == 'cuda' else ['eager']:
        torch.manual_seed(0)
        net = Net().to(dev)
        decay = [net.e0.weight, net.e1.weight, net.l1.weight, net.l3.weight, net.l5.weight, net.out.weight]
        rest = [q for q in net.parameters() if all(q is not w for w in decay)]
        extra = {'fused': True, 'capturable': mode == 'graphed'} if dev == 'cuda' else {}
        opt = torch.optim.AdamW([{'params': decay}, {'params': rest, 'weight_decay': 0.0}], lr=1e-3, weight_decay=0.01, **extra)
        net.train()

        def step(xb, yb):
            opt.zero_grad(set_to_none=False)
            # bf16: autocast (the products in bf16, the parameters and the optimizer in fp32)
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=precision == 'bf16', cache_enabled=False):
                loss = F.cross_entropy(net(xb), yb)
            loss.backward()
            opt.step()
            return loss

        if mode == 'eager':
            def epoch():
                perm = torch.randperm(a.samples, device=dev)
                for s in range(steps_per_epoch):
                    idx = perm[s * BATCH:(s + 1) * BATCH]
                    step(X[idx], Y[idx])
        else:
            idx_static = torch.arange(BATCH, device=dev)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):  # warm-up before capture (the optimizer's state made)
                    step(X.index_select(0, idx_static), Y.index_select(0, idx_static))
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                loss_static = step(X.index_select(0, idx_static), Y.index_select(0, idx_static))

            def epoch():
                perm = torch.randperm(a.samples, device=dev)
                for s in range(steps_per_epoch):
                    part = perm[s * BATCH:(s + 1) * BATCH]
                    if part.numel() < BATCH:  # the last, short batch: padded with rows of this epoch
                        part = torch.cat([part, perm[:BATCH - part.numel()]])
                    idx_static.copy_(part)
                    graph.replay()
        epoch()  # warm-up epoch
        sync()
        t0 = time.perf_counter()
        for _ in range(a.epochs):
            epoch()
        sync()
        wall = time.perf_counter() - t0
        steps = a.epochs * steps_per_epoch
        rows.append({'precision': precision, 'mode': mode, 'samples': a.samples, 'epochs': a.epochs, 'steps': steps,
                     'wallMs': wall * 1e3, 'wallStepUs': wall * 1e6 / steps})
        print(f"torch {mode} {precision}: {a.epochs} epochs {wall * 1e3:.1f} ms ({wall * 1e6 / steps:.1f} us a step)")
out = {'torch': torch.__version__, 'device': torch.cuda.get_device_name() if dev == 'cuda' else 'cpu', 'rows': rows}
if a.json:
    with open(a.json, 'w') as f:
        json.dump(out, f, indent=1)
