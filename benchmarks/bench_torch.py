"""sgsim.torch beside torch.optim.SGD and a per-parameter Python loop: images/s and optimizer-step ms.

Workload: a small ResNet (a 3x3 stem, three stages of ``--blocks`` basic blocks with ``--width``,
``2 --width`` and ``4 --width`` channels, global pooling, 10 classes), or with ``--model resnet18``
the CIFAR experiment's ResNet-18 (``sgsim.torch.experiments.cifar.ResNet18``: four stages of two
blocks, ``--width`` 64 for the network's 11.2M parameters), on synthetic CIFAR-shaped
data (3 x 32 x 32, ``--batch`` images, labels uniform), cross-entropy mean loss, ``N = 50,000``
(``num_data``). Timed in the same run, each from the same initial weights, rounds interleaved:

- ``torch SGD momentum``: ``torch.optim.SGD(lr, momentum=0.9, foreach=True)``, the baseline;
- ``sgsim SGHMC``: ``sgsim.torch.SGHMC(friction=0.1, temperature=1)`` (noise every step);
- ``sgsim SGHMC T=0``: its exploration stage (momentum SGD, no noise drawn);
- ``sgsim SGLD``: ``sgsim.torch.SGLD(temperature=1)``;
- ``loop SGHMC``: the cyclical paper's reference code's update, a Python loop over the
  parameters with one ``torch.randn`` and a few small kernels per parameter.

Figures: *images/s* of a whole training step (forward, backward, optimizer step), median over
``--steps`` timed steps after ``--warmup`` untimed ones (warm-up, and ``--compile``'s
compilation, are reported apart); *step ms*: ``optimizer.step()`` alone on fixed gradients,
median and minimum of ``--step-reps`` (the minimum is the figure to trust on a shared machine,
where a busy core stalls torch's intra-op threads for milliseconds). On CUDA every timing
synchronises the device.

    python benchmarks/bench_torch.py                                  # CPU, small: about a minute on 2 cores
    python benchmarks/bench_torch.py --width 64 --blocks 2 --steps 0 --warmup 0   # optimizer.step only, 2.8M parameters
    python benchmarks/bench_torch.py --device cuda --amp bf16 --channels-last --width 64 --blocks 2 --steps 50
    python benchmarks/bench_torch.py --device cuda --model resnet18 --width 64 --steps 30   # ResNet-18, batch 128
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from sgsim.torch import SGHMC, SGLD

N_DATA = 50_000


class Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.skip = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.skip(x))


def resnet(width: int, blocks: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    c = width
    for stage, c_out in enumerate((width, 2 * width, 4 * width)):
        for b in range(blocks):
            layers.append(Block(c, c_out, 2 if stage > 0 and b == 0 else 1))
            c = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10)]
    return nn.Sequential(*layers)


class LoopSGHMC:
    """The reference code's SGHMC update: a Python loop of small kernels per parameter."""

    def __init__(self, params, lr: float, friction: float, temperature: float, num_data: int):
        self.params = list(params)
        self.lr, self.eta, self.temp, self.n = lr, friction, temperature, num_data
        self.buf = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        # on the mean loss: v <- (1 - eta) v - lr grad + sqrt(2 lr eta T / N) xi; theta <- theta + v
        sd = math.sqrt(2.0 * self.lr * self.eta * self.temp / self.n)
        for i, p in enumerate(self.params):
            buf_new = (1 - self.eta) * self.buf[i] - self.lr * p.grad
            buf_new += sd * torch.randn(p.size(), device=p.device, dtype=p.dtype)
            p.add_(buf_new)
            self.buf[i] = buf_new


def optimizers(lr_mean: float) -> dict:
    # every sampler in the cyclical paper's units on U = N * mean loss: lr = lr_mean / N
    alpha = lr_mean / N_DATA
    return {
        "torch SGD momentum": lambda ps: torch.optim.SGD(ps, lr=lr_mean, momentum=0.9, foreach=True),
        "sgsim SGHMC": lambda ps: SGHMC(ps, lr=alpha, friction=0.1, num_data=N_DATA, seed=0),
        "sgsim SGHMC T=0": lambda ps: SGHMC(ps, lr=alpha, friction=0.1, temperature=0.0, num_data=N_DATA, seed=0),
        "sgsim SGLD": lambda ps: SGLD(ps, lr=alpha, num_data=N_DATA, seed=0),
        "loop SGHMC": lambda ps: LoopSGHMC(ps, lr=lr_mean, friction=0.1, temperature=1.0, num_data=N_DATA),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", choices=["off", "bf16"], default="off", help="autocast the forward pass")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (timed apart)")
    parser.add_argument("--model", choices=["small", "resnet18"], default="small")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--blocks", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="timed training steps per optimizer")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--step-reps", type=int, default=50, help="timed optimizer.step() calls per optimizer")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    torch.manual_seed(0)
    if args.model == "resnet18":
        from sgsim.torch.experiments.cifar import ResNet18

        base = ResNet18(10, args.width).to(device=device, memory_format=fmt)
    else:
        base = resnet(args.width, args.blocks).to(device=device, memory_format=fmt)
    n_params = sum(p.numel() for p in base.parameters())
    n_tensors = sum(1 for _ in base.parameters())
    gen = torch.Generator(device=device).manual_seed(1)
    x = torch.randn(args.batch, 3, 32, 32, device=device, generator=gen).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (args.batch,), device=device, generator=gen)
    autocast = (
        (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if args.amp == "bf16" else contextlib.nullcontext
    )

    runs = {}
    for name, make in optimizers(0.05).items():
        model = copy.deepcopy(base)
        forward = torch.compile(model) if args.compile else model
        runs[name] = (model, forward, make(list(model.parameters())))

    def train_step(name):
        model, forward, opt = runs[name]
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = nn.functional.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()

    warm, times = {}, {name: [] for name in runs}
    for name in runs:
        sync()
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            train_step(name)
        sync()
        warm[name] = time.perf_counter() - t0
    for _ in range(args.steps):  # rounds interleaved: drifts of the machine hit every optimizer alike
        for name in runs:
            sync()
            t0 = time.perf_counter()
            train_step(name)
            sync()
            times[name].append(time.perf_counter() - t0)

    # the optimizer alone, on fixed gradients (in each parameter's memory layout), rounds interleaved
    for model, _, opt in runs.values():
        for p in model.parameters():
            p.grad = torch.empty_like(p).normal_(generator=gen)
        opt.step()
    step_times = {name: [] for name in runs}
    for _ in range(args.step_reps):
        for name, (_, _, opt) in runs.items():
            sync()
            t0 = time.perf_counter()
            opt.step()
            sync()
            step_times[name].append(time.perf_counter() - t0)
    step_ms = {name: 1e3 * statistics.median(t) for name, t in step_times.items()}
    step_min_ms = {name: 1e3 * min(t) for name, t in step_times.items()}

    print(
        f"{'ResNet-18' if args.model == 'resnet18' else 'ResNet'} width {args.width}, "
        f"{2 if args.model == 'resnet18' else args.blocks} block(s) per stage: {n_params:,} parameters in {n_tensors} "
        f"tensors; batch {args.batch} x 3 x 32 x 32 on {device} (amp {args.amp}, channels_last "
        f"{args.channels_last}, compile {args.compile}, {torch.get_num_threads()} threads), median of "
        f"{args.steps} steps after {args.warmup} warm-up, step ms median of {args.step_reps}"
    )
    print(
        "| optimizer | images/s | train step ms | optimizer.step ms (median) | (min) | warm-up s |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    report = {"config": vars(args) | {"n_params": n_params, "n_tensors": n_tensors}, "rows": {}}
    for name in runs:
        t = statistics.median(times[name]) if times[name] else math.nan  # --steps 0: the optimizer only
        row = {
            "images_per_s": args.batch / t,
            "train_step_ms": 1e3 * t,
            "step_ms": step_ms[name],
            "step_min_ms": step_min_ms[name],
            "warmup_s": warm[name],
        }
        report["rows"][name] = row
        print(
            f"| {name} | {row['images_per_s']:.0f} | {row['train_step_ms']:.1f} | {row['step_ms']:.3f} "
            f"| {row['step_min_ms']:.3f} | {row['warmup_s']:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
