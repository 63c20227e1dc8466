"""The GPU benchmark's PyTorch side (tools/gpu_check.sh): Alpa's gpt_350m shape
(24 layers, hidden 1024, 16 heads, sequence 1024, vocabulary 51200) as a
pre-norm GPT written in plain PyTorch eager (no torch.compile, no fused
attention), bf16 autocast over fp32 parameters, Adam, batch 8 of random
tokens: the model tests/gpu/bench_gpt.mesh trains with meshflow. Prints one
line the check parses: the median step time, the model FLOPs of a step and
the peak memory."""
import statistics
import sys
import time

import torch

LAYERS, HIDDEN, HEADS, SEQ, VOCAB, BATCH, STEPS = 24, 1024, 16, 1024, 51200, 8, 6


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(HIDDEN)
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = torch.nn.Linear(HIDDEN, HIDDEN)
        self.ln2 = torch.nn.LayerNorm(HIDDEN)
        self.fc1 = torch.nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = torch.nn.Linear(4 * HIDDEN, HIDDEN)
        mask = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        heads = lambda t: t.view(b, s, HEADS, h // HEADS).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        scores = (q @ k.transpose(-1, -2)) / (h // HEADS) ** 0.5
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        attention = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.position = torch.nn.Embedding(SEQ, HIDDEN)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = torch.nn.LayerNorm(HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    if not torch.cuda.is_available():
        print("torch_bench SKIPPED: no CUDA device")
        return 77
    torch.manual_seed(1)
    model = Gpt().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    params = sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device="cuda")
    times = []
    for _ in range(STEPS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    # 6 FLOPs per parameter and token (forward and backward) plus attention's
    # two s x s products (forward 4·s²·h per layer and sequence, backward twice that).
    flops = 6 * params * BATCH * SEQ + 12 * LAYERS * BATCH * SEQ * SEQ * HIDDEN
    step = statistics.median(times[1:])
    print(f"torch_bench step_seconds {step:.4f} params {params} flops {flops} "
          f"peak_memory {torch.cuda.max_memory_allocated()} loss {loss.item():.4f} torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
