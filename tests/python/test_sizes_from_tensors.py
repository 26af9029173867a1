"""Note [Sizes read from tensors] (aot.py): Phi-3.5-MoE's rotary embedding takes its length from
a 0-d tensor (arange(cache_position[-1] + 1)). PyTorch reads that value on the host, as eager
does, and the rest compiles once in dyngen for every length, without a fallback."""

import torch

import dyngen
import dyngen.thunderfx


class _Rotary(torch.nn.Module):
    """PhimoeRotaryEmbedding's forward, in small."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", torch.linspace(0.1, 1.0, 4))

    def forward(self, x, seq_len=None):
        scale = None
        if seq_len:
            scale = 2.0 if seq_len > 4096 else 1.5
        t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        return (freqs.cos() * scale).to(x.dtype)


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rotary = _Rotary()

    def forward(self, x, cache_position):
        cos = self.rotary(x, seq_len=cache_position[-1] + 1)
        return x * cos.sum(0)


def test_a_length_read_from_a_tensor_compiles_once(fresh):
    model = _Model()
    compiled = dyngen.thunderfx.compile(model)
    calls = []
    for n in (5, 7, 9, 12):
        x = torch.randn(n, 4)
        pos = torch.arange(n)
        torch.testing.assert_close(compiled(x, pos), model(x, pos))
        calls.append(dyngen.stats()["backend_calls"])
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["ops_where"]["host"] >= 1 and s["graphs_where"]["eager"] == 0, s
    assert calls[-1] == calls[-2], calls  # nothing new after warm-up
    assert "emulate" in s["executor"].split("+"), s  # stats() joins every executor used
