"""flambeau-gpt's model written in PyTorch 2.13 (llm.c's test_gpt2 pattern): the same
layers, initialisation aside, so that with the same weights it gives the same loss and
gradients. Also used by bench/bench_gpt.py for the eager training-speed comparison.

Attention is SDPA with a boolean mask (causal, same document, optional window): the same
function flambeau computes with FlexAttention and a block mask."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_config(text):
    """The `key = value` lines of a flambeau-gpt config (numbers as int or float)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        k, v = (s.strip() for s in line.split("=", 1))
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


class Block(nn.Module):
    def __init__(self, d, hidden, n_head):
        super().__init__()
        self.n_head = n_head
        self.attn_norm, self.mlp_norm = nn.RMSNorm(d), nn.RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w_gate, self.w_up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w_down = nn.Linear(hidden, d, bias=False)

    def forward(self, x, rope, mask):
        """A module call, so that FSDP's hooks see each block."""
        B, T, d = x.shape
        H = self.n_head
        h = self.attn_norm(x)
        q, k, v = (w(h).view(B, T, H, d // H).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = rope(q), rope(k)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        x = x + self.wo(a.transpose(1, 2).reshape(B, T, d))
        h = self.mlp_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Gpt(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, self.n_head = cfg["d_model"], cfg["n_head"]
        hidden = (d * 8 // 3 + 63) // 64 * 64
        self.wte = nn.Embedding(cfg["vocab_size"], d)
        self.blocks = nn.ModuleList(Block(d, hidden, self.n_head) for _ in range(cfg["n_layer"]))
        self.norm = nn.RMSNorm(d)
        head = d // self.n_head
        pos = np.arange(cfg["seq_len"], dtype=np.float64)[:, None]
        inv = cfg["rope_theta"] ** (-2.0 * np.arange(head // 2, dtype=np.float64) / head)
        self.register_buffer("cos", torch.from_numpy(np.cos(pos * inv).astype(np.float32)), persistent=False)
        self.register_buffer("sin", torch.from_numpy(np.sin(pos * inv).astype(np.float32)), persistent=False)

    def rope(self, x):
        T, half = x.shape[2], x.shape[3] // 2
        c, s = self.cos[:T], self.sin[:T]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def mask(self, doc_ids):
        """None when plain causal attention is meant (one document per row, no window)."""
        T = doc_ids.shape[1]
        window = self.cfg.get("window", 0)
        if window == 0 and bool((doc_ids == doc_ids[:, :1]).all()):
            return None
        i = torch.arange(T)
        m = (i[:, None] >= i[None, :]) & (doc_ids[:, :, None] == doc_ids[:, None, :])
        if window > 0:
            m = m & (i[:, None] - i[None, :] <= window)
        return m[:, None]

    def hidden(self, inputs, doc_ids):
        mask = self.mask(doc_ids)
        x = self.wte(inputs)
        for b in self.blocks:
            x = b(x, self.rope, mask)
        return self.norm(x)

    def loss(self, inputs, targets, doc_ids, z_loss):
        h = self.hidden(inputs, doc_ids).reshape(-1, self.cfg["d_model"])
        logits = h @ self.wte.weight.T
        loss = F.cross_entropy(logits, targets.reshape(-1))
        if z_loss > 0:
            loss = loss + z_loss * torch.logsumexp(logits, dim=-1).pow(2).mean()
        return loss
