"""The GPT of meshflow's stdlib (stdlib/models.mesh, stdlib/layers.mesh) in PyTorch.

Same architecture, sizes and parameter count as `gpt(...)`: learned token and
position embeddings, pre-norm blocks (ln1, causal self-attention with one fused
qkv linear, residual; ln2, fc1 -> GeLU (tanh) -> fc2, residual), a final layer
norm, a bias-free head and the mean cross entropy over every position. The
model is split into two halves for the hand-written pipeline; `GPT` is the two
halves run one after the other.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int


# The two models of the comparison, as gpt_bench.mesh declares them.
CONFIGS = {
    "tiny": GPTConfig(layers=2, hidden=64, heads=4, seq=64, vocab=96),
    "wide": GPTConfig(layers=4, hidden=512, heads=8, seq=64, vocab=512),
}
BATCH = 16


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.hidden)
        # Future positions, built once: scores there become -inf, so softmax gives
        # them weight 0 (meshflow's causal_mask). A plain attribute, not a buffer:
        # DDP would broadcast a buffer, and gloo cannot broadcast booleans.
        self.future = torch.ones(cfg.seq, cfg.seq, dtype=torch.bool).triu(1)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(h // self.heads))
        scores = scores.masked_fill(self.future, float("-inf"))
        context = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
        return self.out(context)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.hidden, eps=1e-5)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.hidden, eps=1e-5)
        self.fc1 = nn.Linear(cfg.hidden, 4 * cfg.hidden)
        self.fc2 = nn.Linear(4 * cfg.hidden, cfg.hidden)

    def forward(self, x):
        a = x + self.attn(self.ln1(x))
        return a + self.fc2(F.gelu(self.fc1(self.ln2(a)), approximate="tanh"))


class FirstHalf(nn.Module):
    """Embeddings and the first `len(blocks)` blocks: tokens -> hidden states."""

    def __init__(self, cfg, blocks):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Parameter(torch.randn(cfg.seq, cfg.hidden) * 0.02)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(blocks))

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe
        for block in self.blocks:
            x = block(x)
        return x


class SecondHalf(nn.Module):
    """The remaining blocks, final norm, head and loss: hidden states -> mean loss."""

    def __init__(self, cfg, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(cfg.hidden, eps=1e-5)
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, x, labels):
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def halves(cfg):
    """The pipeline's two stages: blocks split evenly, embeddings first, head last.

    meshflow's planner makes the same cut in gpt_bench.mesh's 2-stage plan for
    both models (`p.explain("block1")` puts the tiny GPT's block 1 on stage 1,
    the wide GPT's on stage 0 and its block 2 on stage 1).
    """
    first = cfg.layers // 2
    return FirstHalf(cfg, first), SecondHalf(cfg, cfg.layers - first)


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.first, self.second = halves(cfg)

    def forward(self, tokens, labels):
        return self.second(self.first(tokens), labels)


def parameter_count(module):
    return sum(p.numel() for p in module.parameters())


def optimizer(params):
    """Adam as meshflow's adam(lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8)."""
    return torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)


def batch(cfg, step, size=BATCH):
    """Synthetic tokens and labels, uniform below the vocabulary (meshflow's synthetic())."""
    g = torch.Generator().manual_seed(step)
    tokens = torch.randint(cfg.vocab, (size, cfg.seq), generator=g)
    labels = torch.randint(cfg.vocab, (size, cfg.seq), generator=g)
    return tokens, labels
