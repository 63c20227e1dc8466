#!/usr/bin/python3
"""Train torch_gpt's GPT on one configuration and print every step's time.

    /usr/bin/python3 bench/pytorch/torch_bench.py --model tiny --config pipeline --steps 20

Configurations (bench/README.md, "PyTorch on the CPU"):
  serial    one process
  ddp       two processes, DistributedDataParallel over gloo, 8 samples each
  pipeline  two processes, one half of the model each, 1F1B over 4 microbatches
            of 4, activations and gradients sent with torch.distributed over gloo

Each process runs on one thread. The last line is `RESULT {json}` with the
step times after the warm-up, for compare.py.
"""

import os

# Debian's torch calls OpenBLAS, which sizes its own thread pool from these when
# it loads: torch.set_num_threads(1) alone leaves it one thread per core.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import socket
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel
except ImportError:
    sys.exit("torch_bench.py: PyTorch is not installed for " + sys.executable +
             " (on Debian: apt-get install --no-install-recommends python3-torch)")

import torch_gpt

MICROBATCHES = 4


def measure(prepare, run, steps, warmup, distributed):
    """Times `run` over warmup + steps steps; returns the times after the warm-up and all losses.

    In a distributed run every process starts a step together (a barrier, not
    timed) and the step's time is the slowest process's, as meshflow's parallel
    runtime times a step from its devices' common start to the last one's end.
    """
    seconds, losses = [], []
    for step in range(1, warmup + steps + 1):
        inputs = prepare(step)
        if distributed:
            dist.barrier()
        start = time.perf_counter()
        loss = run(inputs)
        elapsed = time.perf_counter() - start
        if distributed:
            elapsed, loss = reduce_step(elapsed, loss)
        seconds.append(elapsed)
        losses.append(float(loss))
    return seconds[warmup:], losses


def reduce_step(elapsed, loss):
    """The slowest process's time and the batch's loss (each process returns its share)."""
    t = torch.tensor([elapsed])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    l = loss.detach().reshape(1).clone()
    dist.all_reduce(l, op=dist.ReduceOp.SUM)
    return t.item(), l.item()


def serial_step(cfg):
    # The seed of the other configurations: the three print the same losses.
    torch.manual_seed(1)
    model = torch_gpt.GPT(cfg)
    opt = torch_gpt.optimizer(model.parameters())

    def run(inputs):
        opt.zero_grad(set_to_none=True)
        loss = model(*inputs)
        loss.backward()
        opt.step()
        return loss.detach()

    return (lambda step: torch_gpt.batch(cfg, step)), run


def ddp_step(cfg, rank, world):
    # DDP broadcasts rank 0's parameters at construction; the seed only makes runs repeat.
    torch.manual_seed(1)
    model = DistributedDataParallel(torch_gpt.GPT(cfg))
    opt = torch_gpt.optimizer(model.parameters())
    share = torch_gpt.BATCH // world

    def prepare(step):
        tokens, labels = torch_gpt.batch(cfg, step)
        rows = slice(rank * share, (rank + 1) * share)
        return tokens[rows], labels[rows]

    def run(inputs):
        opt.zero_grad(set_to_none=True)
        loss = model(*inputs)
        loss.backward()  # DDP all-reduces gradient buckets as the backward produces them.
        opt.step()
        return loss.detach() / world

    return prepare, run


def one_f_one_b(rank, stages, microbatches):
    """Rank `rank`'s actions in 1F1B order: [('F', j) | ('B', j)], as docs/schedules.md gives it."""
    warmup = min(stages - rank - 1, microbatches)
    order = [("F", j) for j in range(warmup)]
    forward = warmup
    for backward in range(microbatches):
        if forward < microbatches:
            order.append(("F", forward))
            forward += 1
        order.append(("B", backward))
    return order


def pipeline_step(cfg, rank):
    torch.manual_seed(1)
    stage = torch_gpt.halves(cfg)[rank]
    opt = torch_gpt.optimizer(stage.parameters())
    order = one_f_one_b(rank, 2, MICROBATCHES)
    size = torch_gpt.BATCH // MICROBATCHES
    shape = (size, cfg.seq, cfg.hidden)
    run = first_stage_run if rank == 0 else last_stage_run

    def prepare(step):
        tokens, labels = torch_gpt.batch(cfg, step)
        return (tokens if rank == 0 else labels).chunk(MICROBATCHES)

    return prepare, lambda inputs: run(stage, opt, order, shape, inputs)


def first_stage_run(stage, opt, order, shape, tokens):
    """Forwards send activations to rank 1; backwards wait for their gradient from it."""
    opt.zero_grad(set_to_none=True)
    # Every gradient's receive is posted up front, so none waits for a late recv.
    grads = [torch.empty(shape) for _ in tokens]
    received = [dist.irecv(g, src=1, tag=j) for j, g in enumerate(grads)]
    outputs, sent = {}, []
    for kind, j in order:
        if kind == "F":
            outputs[j] = stage(tokens[j])
            sent.append(dist.isend(outputs[j].detach(), dst=1, tag=j))
        else:
            received[j].wait()
            outputs.pop(j).backward(grads[j])
    for request in sent:
        request.wait()
    opt.step()
    return torch.zeros(())


def last_stage_run(stage, opt, order, shape, labels):
    """Forwards wait for rank 0's activations; backwards send the input's gradient back."""
    opt.zero_grad(set_to_none=True)
    inputs = [torch.empty(shape) for _ in labels]
    received = [dist.irecv(x, src=0, tag=j) for j, x in enumerate(inputs)]
    losses, sent, total = {}, [], torch.zeros(())
    for kind, j in order:
        if kind == "F":
            received[j].wait()
            inputs[j].requires_grad_(True)
            # The batch's mean loss is the mean of the microbatches' means.
            losses[j] = stage(inputs[j], labels[j]) / len(labels)
        else:
            loss = losses.pop(j)
            loss.backward()
            total += loss.detach()
            sent.append(dist.isend(inputs[j].grad, dst=0, tag=j))
    for request in sent:
        request.wait()
    opt.step()
    return total


def worker(rank, world, port, args):
    torch.set_num_threads(1)
    cfg = torch_gpt.CONFIGS[args.model]
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    if args.config == "serial":
        prepare, run = serial_step(cfg)
    elif args.config == "ddp":
        prepare, run = ddp_step(cfg, rank, world)
    else:
        prepare, run = pipeline_step(cfg, rank)
    seconds, losses = measure(prepare, run, args.steps, args.warmup, world > 1)
    if rank == 0:
        report(args, cfg, seconds, losses)
    if world > 1:
        leave(rank)


def leave(rank):
    """Ends a distributed worker once both are done, without tearing gloo down.

    With destroy_process_group() a worker whose peer had already exited
    sometimes spun forever on the closed socket (1 run in 8 under load), so
    both wait for each other and then exit at once, skipping the teardown.
    """
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def report(args, cfg, seconds, losses):
    print(f"model: torch GPT {cfg}, {torch_gpt.parameter_count(torch_gpt.GPT(cfg))} parameters")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread per process, "
          f"config {args.config}, batch {torch_gpt.BATCH}")
    for i, loss in enumerate(losses):
        timed = i - args.warmup
        ms = f"{seconds[timed] * 1e3:.1f} ms" if timed >= 0 else "(warm-up)"
        print(f"step {i + 1:>4}/{len(losses)}  loss {loss:.4f}  {ms}")
    print(f"median step: {statistics.median(seconds) * 1e3:.1f} ms")
    print("RESULT " + json.dumps({"step_seconds": seconds, "losses": losses}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(torch_gpt.CONFIGS), default="tiny")
    parser.add_argument("--config", choices=["serial", "ddp", "pipeline"], default="serial")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    args = parser.parse_args()
    world = 1 if args.config == "serial" else 2
    if world == 1:
        worker(0, 1, None, args)
    else:
        mp.spawn(worker, args=(world, free_port(), args), nprocs=world)


if __name__ == "__main__":
    main()
