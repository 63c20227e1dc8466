#!/usr/bin/env python3
"""meshflow against PyTorch on the CPU: the same GPTs, serial, data-parallel and pipelined.

    python3 bench/pytorch/compare.py build/repl/meshflow --rounds 5 --steps 20

Runs each configuration's meshflow and PyTorch trainings in alternating rounds
and prints, per configuration, both median step times and meshflow/PyTorch
(target <= 0.8), and meshflow's 1-device plan against its serial executor
(target <= 1.0). bench/README.md ("PyTorch on the CPU") describes the
configurations and how each side is timed. PyTorch (Debian's python3-torch) is
needed by this benchmark only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# meshflow's configurations (gpt_bench.mesh) and the PyTorch one each is set
# against (torch_bench.py): the 1-device plan is compared with serial PyTorch too.
TORCH_CONFIG = {"serial": "serial", "plan1": "serial", "dp": "ddp", "pp": "pipeline"}
DESCRIPTION = {
    "serial": "1 device, serial executor  | 1 process",
    "plan1": "1 device, 1-device plan    | 1 process",
    "dp": "2 devices, data-parallel   | 2 processes, DDP (gloo)",
    "pp": "2 devices, 2 stages 1F1B/4 | 2 processes, 1F1B/4 (gloo)",
}
TARGET_RATIO = 0.8
# meshflow with MESHFLOW_CPU_GEMM=openblas (--also-openblas): its GEMMs as before its own kernel.
OPENBLAS_SIDE = "meshflow-openblas"

# One progress line of train(): `step    3/23  loss 4.5705  20136 tokens/s  50.9 ms ...`.
STEP_LINE = re.compile(r"^step\s+(\d+)/(\d+)\s+loss\s+(\S+)\s+\S+\s+\S+\s+([\d.]+) ms", re.M)


def fail(message):
    sys.exit(f"compare.py: {message}")


def check_torch(python):
    """PyTorch is this benchmark's dependency only: say how to get it when it is missing."""
    probe = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        fail(f"PyTorch is not installed for {python}; this benchmark needs it "
             "(on Debian: apt-get install --no-install-recommends python3-torch), "
             "or pass --python with an interpreter that has it")
    return probe.stdout.strip()


def run_checked(command, timeout, cwd=None, env=None):
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"`{' '.join(command)}` ran longer than {timeout} s (--timeout); stopped it")
    if done.returncode != 0:
        fail(f"`{' '.join(command)}` failed (exit {done.returncode}):\n"
             f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


def meshflow_steps(args, model, config, workdir, gemm=None):
    """Times of the steps after the warm-up, in seconds, from train()'s progress lines.

    `gemm`: the sgemm meshflow's cpu kernels run (MESHFLOW_CPU_GEMM; docs/runtime.md,
    "GEMM"), or None for its default.

    train() returns only the total time of its steps; each progress line gives
    one step's time, measured around the step alone (data and printing outside).
    """
    script = os.path.join(workdir, f"{model}_{config}.mesh")
    with open(script, "w") as f:
        f.write('import "gpt_bench.mesh" as bench\n')
        f.write(f'bench.run("{model}", "{config}", {args.steps}, {args.warmup})\n')
    env = dict(os.environ, MESHFLOW_CPU_GEMM=gemm) if gemm else None
    out = run_checked([args.meshflow, "run", script, "-I", HERE], args.timeout, cwd=workdir, env=env)
    lines = STEP_LINE.findall(out)
    if len(lines) != args.steps + args.warmup:
        fail(f"expected {args.steps + args.warmup} progress lines from meshflow, "
             f"got {len(lines)}:\n{out}")
    return [float(ms) / 1e3 for *_, ms in lines[args.warmup:]]


def torch_steps(args, model, config):
    """Times of the steps after the warm-up, in seconds, from torch_bench.py's RESULT line."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = run_checked([args.python, os.path.join(HERE, "torch_bench.py"), "--model", model,
                       "--config", config, "--steps", str(args.steps), "--warmup", str(args.warmup)],
                      args.timeout, env=env)
    result = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if not result:
        fail(f"torch_bench.py printed no RESULT line:\n{out}")
    return json.loads(result[-1][len("RESULT "):])["step_seconds"]


def round_jobs(models, configs, also_openblas):
    """One round's runs, meshflow and PyTorch interleaved; a PyTorch run serves every
    meshflow configuration set against it (serial PyTorch: serial and plan1).
    With `also_openblas`, each meshflow run is followed by the same run on OpenBLAS's sgemm."""
    jobs = []
    for model in models:
        torch_done = set()
        for config in configs:
            jobs.append(("meshflow", model, config))
            if also_openblas:
                jobs.append((OPENBLAS_SIDE, model, config))
            if TORCH_CONFIG[config] not in torch_done:
                torch_done.add(TORCH_CONFIG[config])
                jobs.append(("torch", model, TORCH_CONFIG[config]))
    return jobs


def run_rounds(args, workdir):
    """Median and fastest step of every run, by (side, model, config), one entry per round.

    Odd rounds run the jobs in reverse, so neither side always runs first after
    the other: the host's speed drifts over minutes on a shared machine.
    """
    medians, fastest = {}, {}
    jobs = round_jobs(args.models, args.configs, args.also_openblas)
    for r in range(args.rounds):
        for side, model, config in (jobs if r % 2 == 0 else list(reversed(jobs))):
            if side == "meshflow":
                times = meshflow_steps(args, model, config, workdir)
            elif side == OPENBLAS_SIDE:
                times = meshflow_steps(args, model, config, workdir, gemm="openblas")
            else:
                times = torch_steps(args, model, config)
            median = statistics.median(times)
            medians.setdefault((side, model, config), []).append(median)
            fastest.setdefault((side, model, config), []).append(min(times))
            print(f"round {r + 1}/{args.rounds}  {model:<4}  {side:<17}  {config:<8}  "
                  f"median step {median * 1e3:8.1f} ms  (of {len(times)}, "
                  f"min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f})", flush=True)
    return medians, fastest


def ms(rounds):
    return f"{statistics.median(rounds) * 1e3:8.1f}"


def spread(rounds):
    return f"{min(rounds) * 1e3:.1f}-{max(rounds) * 1e3:.1f}"


def verdict(ratio, target):
    return "met" if ratio <= target else "NOT met"


def print_ratios(args, figures, title, side="meshflow"):
    """One table: meshflow's (`side`'s) and PyTorch's figure per configuration (the
    median over rounds of `figures`, one per round) and their ratio."""
    print(f"\n{title}")
    print(f"{'model':<5} {'config':<7} {'meshflow | PyTorch':<55} {'meshflow ms':>11} "
          f"{'range':>13} {'PyTorch ms':>10} {'range':>13} {'ratio':>6}  target <= {TARGET_RATIO}")
    for model in args.models:
        for config in args.configs:
            mine = figures[(side, model, config)]
            theirs = figures[("torch", model, TORCH_CONFIG[config])]
            ratio = statistics.median(mine) / statistics.median(theirs)
            print(f"{model:<5} {config:<7} {DESCRIPTION[config]:<55} {ms(mine):>11} "
                  f"{spread(mine):>13} {ms(theirs):>10} {spread(theirs):>13} {ratio:6.2f}  "
                  f"{verdict(ratio, TARGET_RATIO)}")


def print_table(args, medians, fastest):
    """Medians over rounds of each round's median step, and the ratios; then the
    same of each round's fastest step, which a busy host disturbs least."""
    print_ratios(args, medians, f"median over {args.rounds} rounds of each run's median step "
                 f"({args.steps} steps after {args.warmup} warm-up); ranges are the rounds' medians")
    print_ratios(args, fastest, f"median over {args.rounds} rounds of each run's fastest step "
                 "(the least disturbed on a busy host); ranges are the rounds' fastest")
    if args.also_openblas:
        for figures, which in ((medians, "median"), (fastest, "fastest")):
            print_ratios(args, figures, f"meshflow on OpenBLAS's sgemm (MESHFLOW_CPU_GEMM=openblas), "
                         f"the same rounds: median of each run's {which} step", side=OPENBLAS_SIDE)
    if "serial" in args.configs and "plan1" in args.configs:
        print("\nmeshflow's 1-device plan over its serial executor, by the medians (target <= 1.0: no slower)")
        for model in args.models:
            ratio = (statistics.median(medians[("meshflow", model, "plan1")]) /
                     statistics.median(medians[("meshflow", model, "serial")]))
            print(f"{model:<5} {ratio:6.2f}  {verdict(ratio, 1.0)}")


def load_average():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def print_header(args, torch_version):
    load = load_average()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
          f"{platform.node()}: {os.cpu_count()} CPUs, load average {load}")
    print(f"meshflow: {args.meshflow}; PyTorch {torch_version} ({args.python}), 1 thread per process")
    print(f"models {', '.join(args.models)}, configurations {', '.join(args.configs)}, "
          f"{args.rounds} rounds of {args.steps} steps after {args.warmup} warm-up\n", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("meshflow", nargs="?", default=os.path.join(ROOT, "build/repl/meshflow"),
                        help="the meshflow binary (default: build/repl/meshflow)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them (default 3)")
    parser.add_argument("--models", default="tiny,wide", help="tiny,wide (default both)")
    parser.add_argument("--configs", default="serial,plan1,dp,pp",
                        help="of serial,plan1,dp,pp (default all)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the Python with PyTorch (default /usr/bin/python3, Debian's)")
    parser.add_argument("--timeout", type=int, default=900,
                        help="seconds one run may take before the comparison stops (default 900)")
    parser.add_argument("--also-openblas", action="store_true",
                        help="also run every meshflow configuration on OpenBLAS's sgemm, in the same rounds")
    parser.add_argument("--json", help="also write every round's median and fastest step to this file")
    args = parser.parse_args()
    args.models = args.models.split(",")
    args.configs = args.configs.split(",")
    if not set(args.models) <= {"tiny", "wide"}:
        parser.error(f"unknown model in {args.models} (tiny, wide)")
    if not set(args.configs) <= set(TORCH_CONFIG):
        parser.error(f"unknown configuration in {args.configs} ({', '.join(TORCH_CONFIG)})")
    if not os.access(args.meshflow, os.X_OK):
        parser.error(f"no meshflow binary at {args.meshflow} (build it, or pass its path)")
    args.meshflow = os.path.abspath(args.meshflow)
    return args


def main():
    args = parse_args()
    torch_version = check_torch(args.python)
    print_header(args, torch_version)
    with tempfile.TemporaryDirectory(prefix="meshflow-vs-torch-") as workdir:
        medians, fastest = run_rounds(args, workdir)
    print_table(args, medians, fastest)
    # A busy host slows both sides unevenly: the load says how far to trust the ratios.
    print(f"\nload average at the end: {load_average()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"median": {"|".join(k): v for k, v in medians.items()},
                       "fastest": {"|".join(k): v for k, v in fastest.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
