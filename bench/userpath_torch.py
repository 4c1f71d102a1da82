# userpath_torch.py: PyTorch doing the user calls of bench/userpath.mjs on the same shapes, timed
# the same way (wall clock around the call, synchronised): eager as most users write it (data
# set held on the GPU, a new host batch each step() call, predict() from host rows back to host
# rows), and a captured CUDA graph of the step with the data on the GPU (its best).
#   python3 bench/userpath_torch.py [--samples 60000] [--nets S,M] [--json out.json]
import argparse, json, time
import torch

p = argparse.ArgumentParser()
p.add_argument('--samples', type=int, default=60000)
p.add_argument('--nets', default='S,M')
p.add_argument('--reps', type=int, default=5)
p.add_argument('--json')
a = p.parse_args()
dev = 'cuda' if torch.cuda.is_available() else 'cpu'
NETS = {'S': ([784, 128, 10], 100), 'M': ([784, 1024, 1024, 10], 256), 'P': ([784, 32, 10], 100)}

def sync():
    if dev == 'cuda': torch.cuda.synchronize()

def med(v): return sorted(v)[len(v) // 2]

g = torch.Generator().manual_seed(1)
X = torch.rand(a.samples, 784, generator=g)
Y = torch.randint(0, 10, (a.samples,), generator=g)
rows = []
for net in a.nets.split(','):
    layers, batch = NETS[net]
    mods = []
    for i in range(1, len(layers)):
        mods.append(torch.nn.Linear(layers[i - 1], layers[i]))
        if i < len(layers) - 1: mods.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*mods).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, **({'fused': True} if dev == 'cuda' else {}))
    lossf = torch.nn.CrossEntropyLoss()
    Xd, Yd = X.to(dev), Y.to(dev)
    def row(call, us, note=None):
        rows.append({'net': net, 'call': call, 'wallUs': us, **({'note': note} if note else {})})
    def epoch():
        perm = torch.randperm(a.samples, device=dev)
        for b in range(0, a.samples, batch):
            idx = perm[b:b + batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(Xd[idx]), Yd[idx])
            loss.backward()
            opt.step()
        return loss.item()
    if net != 'P':
        epoch()
        w = []
        for _ in range(a.reps):
            sync(); t0 = time.perf_counter(); epoch(); sync(); w.append((time.perf_counter() - t0) * 1e6)
        row('fit 1 epoch, eager (data on the device)', w)
        if net == 'S':
            sync(); t0 = time.perf_counter()
            for _ in range(10): epoch()
            sync(); row('fit 10 epochs, eager', [(time.perf_counter() - t0) * 1e6])
        # step(): a new host batch each call, its loss read back (as nn-arena's step returns it).
        nb = min(200, a.samples // batch)
        xs = [X[i * batch:(i + 1) * batch] for i in range(nb)]
        ys = [Y[i * batch:(i + 1) * batch] for i in range(nb)]
        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
            return loss.item()
        for i in range(20): step(xs[i % nb], ys[i % nb])
        w = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            for i in range(nb): step(xs[i], ys[i])
            w.append((time.perf_counter() - t0) * 1e6 / nb)
        row(f'step() in a loop ({nb} calls, per call), eager', w)
        if dev == 'cuda':
            # The graphed step with the data on the GPU: its floor for a step.
            sx, sy = Xd[:batch].clone(), Yd[:batch].clone()
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    opt.zero_grad(set_to_none=False); l = lossf(model(sx), sy); l.backward(); opt.step()
            torch.cuda.current_stream().wait_stream(s)
            gr = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=False)
            with torch.cuda.graph(gr):
                sl = lossf(model(sx), sy); sl.backward(); opt.step()
            def gepoch():
                perm = torch.randperm(a.samples, device=dev)
                for b in range(0, a.samples - batch + 1, batch):
                    idx = perm[b:b + batch]
                    sx.copy_(Xd[idx]); sy.copy_(Yd[idx]); gr.replay()
            gepoch(); w = []
            for _ in range(a.reps):
                sync(); t0 = time.perf_counter(); gepoch(); sync(); w.append((time.perf_counter() - t0) * 1e6)
            row('fit 1 epoch, graphed step (data on the device)', w)
    model.eval()
    for n in (1, 1000, 4000):
        xq = X[:n]
        def pred():
            with torch.no_grad():
                return torch.softmax(model(xq.to(dev)), 1).cpu()
        for _ in range(20): pred()
        w = []
        for _ in range(a.reps):
            k = 500 if n == 1 else 50 if n <= 1000 else 20
            t0 = time.perf_counter()
            for _ in range(k): pred()
            w.append((time.perf_counter() - t0) * 1e6 / k)
        row(f'predict() of {n} row{"s" if n > 1 else ""} (per call), eager', w)

for r in rows:
    print(f"torch {r['net']} {r['call']}: wall {med(r['wallUs']):.1f} us [{min(r['wallUs']):.1f}-{max(r['wallUs']):.1f}]")
if a.json:
    with open(a.json, 'w') as f:
        json.dump({'benchmark': 'userpath-torch', 'torch': torch.__version__, 'device': torch.cuda.get_device_name() if dev == 'cuda' else 'cpu', 'samples': a.samples, 'rows': rows}, f, indent=2)
