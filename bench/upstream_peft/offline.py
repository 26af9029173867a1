"""What upstream's benchmark_peft.py needs from the network or a GPU, supplied locally, without
editing the installed script (run_upstream_peft.py installs these before calling its main()).

Note [Offline pieces]
- Config: `AutoConfig.from_pretrained(name)` returns bench/moe_peft's config for that model at
  the tiny scale (models.make_config: published architecture, small sizes).
- Tokenizer: `get_tokenizer` returns a word-level tokenizer that maps each word to a stable id
  below the config's vocabulary (crc32), so the script's dummy dataset is the same in every run.
- `datasets`: when the package is not installed, a small in-memory `Dataset` with the two calls
  the script makes (`from_dict`, `map` one row at a time with `remove_columns`).
- CPU: without CUDA, `Module.to_empty(device="cuda:N")` and `Tensor.cuda()` go to the CPU; under
  torchrun (WORLD_SIZE > 1) the script's nccl process group, CUDA device mesh and CUDA counters do
  too (`distributed_cpu_redirects`).

Note [Every parameter initialised]
The script builds the model on the meta device, moves it with `to_empty` (uninitialised memory)
and calls `reset_parameters` where a module has one. That leaves RMSNorm weights, DBRX's fused
expert weights and the rotary `inv_freq` buffers as garbage (OLMoE's loss is NaN at every step).
The `to_empty` wrapper therefore fills every floating parameter and buffer with NaN, runs the
model's own transformers `_init_weights` on every module, recomputes each rotary embedding's
`inv_freq` with its `rope_init_fn`, sets what is still NaN (norm weights to 1, biases to 0, any
other weight from N(0, initializer_range)), and fails if anything is left NaN. The script's own
`reset_parameters` pass then runs as written. All of it draws from a generator seeded by --seed.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
import zlib

import torch


class WordTokenizer:
    """`tokenizer(text, truncation=True, max_length=n)` -> {"input_ids": [...]}."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def __call__(self, text, truncation=False, max_length=None, **_):
        ids = [2 + zlib.crc32(w.encode()) % (self.vocab_size - 2) for w in text.split()]
        return {"input_ids": ids[:max_length] if truncation and max_length else ids}


class InMemoryDataset:
    """The part of `datasets.Dataset` the script uses (Note [Offline pieces])."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    @classmethod
    def from_dict(cls, columns: dict) -> InMemoryDataset:
        n = len(next(iter(columns.values())))
        return cls([{k: v[i] for k, v in columns.items()} for i in range(n)])

    def map(self, fn, batched=False, batch_size=1, remove_columns=()):
        if batched:
            raise NotImplementedError("only batched=False is needed by benchmark_peft.py")
        rows = []
        for row in self.rows:
            new = {k: v for k, v in row.items() if k not in remove_columns}
            new.update(fn(row))
            rows.append(new)
        return InMemoryDataset(rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def provide_datasets() -> str | None:
    """Installs InMemoryDataset as `datasets` when the package is missing; returns a note."""
    try:
        import datasets  # noqa: F401

        return None
    except ImportError:
        mod = types.ModuleType("datasets")
        mod.__spec__ = importlib.machinery.ModuleSpec("datasets", None)  # find_spec() asks
        mod.Dataset = InMemoryDataset
        sys.modules["datasets"] = mod
        return "datasets is not installed: an in-memory Dataset (from_dict, map) stands in"


def cpu_redirects() -> list[str]:
    """Without CUDA: to_empty(device='cuda:N') and Tensor.cuda() go to the CPU."""
    if torch.cuda.is_available():
        return []
    to_empty = torch.nn.Module.to_empty

    def to_empty_cpu(self, *, device, recurse=True):
        dev = torch.device(device)
        return to_empty(self, device="cpu" if dev.type == "cuda" else dev, recurse=recurse)

    torch.nn.Module.to_empty = to_empty_cpu
    torch.Tensor.cuda = lambda self, *a, **k: self
    return ["no CUDA device: to_empty(device='cuda:N') and Tensor.cuda() stay on the CPU"]


def distributed_cpu_redirects() -> list[str]:
    """Without CUDA, what the script's multi-device mode (WORLD_SIZE > 1, under torchrun) asks of
    CUDA goes to the CPU: the process group it creates at import with backend "nccl" uses gloo,
    `torch.cuda.set_device` does nothing, FSDP2's `init_device_mesh("cuda", ...)` makes a CPU
    mesh, and the closing check's `torch.tensor(..., device="cuda")` counters live on the CPU.
    Installed before the script is imported (its process group is made at import)."""
    if torch.cuda.is_available():
        return []
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh

    init_process_group = dist.init_process_group

    def init_gloo(backend=None, *a, **k):
        return init_process_group("gloo", *a, **k)

    dist.init_process_group = init_gloo
    torch.cuda.set_device = lambda device: None
    init_device_mesh = device_mesh.init_device_mesh

    def init_cpu_mesh(device_type, *a, **k):
        return init_device_mesh("cpu" if device_type == "cuda" else device_type, *a, **k)

    device_mesh.init_device_mesh = init_cpu_mesh
    tensor = torch.tensor

    def tensor_cpu(*a, device=None, **k):
        if device is not None and torch.device(device).type == "cuda":
            device = "cpu"
        return tensor(*a, device=device, **k)

    torch.tensor = tensor_cpu
    return [
        "no CUDA device: the script's nccl process group uses gloo, init_device_mesh('cuda') "
        "a CPU mesh, torch.cuda.set_device does nothing, torch.tensor(device='cuda') stays on "
        "the CPU"
    ]


def _hf_model(model):
    from transformers import PreTrainedModel

    return next(m for m in model.modules() if isinstance(m, PreTrainedModel))


def initialise(model, seed: int) -> None:
    """Note [Every parameter initialised]."""
    hf = _hf_model(model)
    std = getattr(hf.config, "initializer_range", 0.02)
    torch.manual_seed(seed)
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.fill_(float("nan"))
        hf.apply(hf._init_weights)
        for m in model.modules():
            if hasattr(m, "rope_init_fn") and isinstance(
                getattr(m, "inv_freq", None), torch.Tensor
            ):
                # device by keyword: transformers 5's compute_default_rope_parameters(config,
                # **kwargs) takes no second positional argument (PhiMoE keeps rope_init_fn)
                inv, scaling = m.rope_init_fn(m.config, device=m.inv_freq.device)
                m.inv_freq.copy_(inv)
                if isinstance(getattr(m, "original_inv_freq", None), torch.Tensor):
                    m.original_inv_freq.copy_(inv)
                m.attention_scaling = scaling
            elif isinstance(getattr(m, "inv_freq", None), torch.Tensor) and hasattr(m, "base"):
                # DBRX's rotary: inv_freq from `dim` and `base`, as its __init__ computes it
                steps = torch.arange(0, m.dim, 2, dtype=torch.int64).float() / m.dim
                m.inv_freq.copy_(1.0 / (m.base**steps))
        for mname, m in model.named_modules():
            for pname, p in m.named_parameters(recurse=False):
                if not torch.isnan(p).any():
                    continue
                if pname == "bias":
                    p.zero_()
                elif "norm" in type(m).__name__.lower() or "norm" in mname.lower():
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, std)
        left = [
            n
            for n, t in list(model.named_parameters()) + list(model.named_buffers())
            if t.is_floating_point() and torch.isnan(t).any()
        ]
    if left:
        raise RuntimeError(f"left uninitialised: {', '.join(left[:10])}")
