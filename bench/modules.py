"""The course's modules against PyTorch's at the 10.6 model size, forward plus backward.

Side by side, in the same process, with the same threads, inputs and loss, timed in
alternating rounds (:func:`bench.timing.interleaved_medians`):

* ``multi_head_attention``: the 10.3 solution's ``MultiHeadAttention`` against
  ``nn.MultiheadAttention(batch_first=True)`` asked for the same outputs (per-head
  weights: ``need_weights=True, average_attn_weights=False``); ``torch_no_weights_s`` is
  PyTorch without the weights (its fused attention kernel);
* ``transformer_block``: the 10.5 solution's ``TransformerBlock`` against
  ``nn.TransformerEncoderLayer``;
* ``transformer_step``: one training step (forward, cross-entropy, backward, Adam) of the
  10.6 solution's ``Transformer`` against ``nn.Transformer`` of the same size with the same
  embeddings, sinusoidal positions and output layer, on a real batch of the course's
  French-English pairs.

Each comparison also records a profile of both sides (aten operators per call and the
operators taking most self CPU time), the evidence for where a ratio comes from.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.timing import calls_per_round, interleaved_medians
from grader.checks.shared_references import sinusoidal_table

TARGET_RATIO = 1.5
A_10_3 = "10.3-multi-head-attention"
A_10_5 = "10.5-transformer-block"
A_10_6 = "10.6-encoder-decoder"


@dataclass
class ModelConfig:
    """The model size everything is measured at (10.6's, when its notebook is there)."""

    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    num_layers: int = 2  # encoder layers, and as many decoder layers
    dropout: float = 0.0
    batch: int = 64
    seq: int = 10
    source: str = "default: d_model=64, heads=4, d_ff=128, 2+2 layers, batch 64, seq 10"


def solution(assignment: str) -> dict | None:
    """The namespace of ``assignment``'s solution notebook, or None while it does not exist."""
    from samples import load_solution_namespace, notebook_path

    try:
        notebook_path(assignment)
    except (ValueError, FileNotFoundError):
        return None
    return load_solution_namespace(assignment)


def model_config(ns_10_6: dict | None) -> ModelConfig:
    """The 10.6 notebook's model size (its ``MODEL_SIZE`` dict and ``BATCH_SIZE``), else the default."""
    cfg = ModelConfig()
    if ns_10_6 is None:
        return cfg
    found = dict(ns_10_6.get("MODEL_SIZE") or ns_10_6.get("CONFIG") or {})
    if "BATCH_SIZE" in ns_10_6:
        found["batch"] = ns_10_6["BATCH_SIZE"]
    aliases = {"heads": "num_heads", "nhead": "num_heads", "layers": "num_layers",
               "batch_size": "batch", "num_encoder_layers": "num_layers",
               "num_decoder_layers": "num_layers"}
    for key, value in found.items():
        key = aliases.get(key, key)
        if key in ModelConfig.__dataclass_fields__ and key != "source":
            setattr(cfg, key, type(getattr(cfg, key))(value))
    if found:
        cfg.source = ("10.6 solution notebook: MODEL_SIZE = "
                      + ", ".join(f"{k}={v}" for k, v in found.items()))
    return cfg


def profile_ops(fn: Callable[[], object], calls: int = 5, top: int = 5) -> dict:
    """aten operators per call of ``fn`` and the ``top`` ones by self CPU time (share in %)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    averages = prof.key_averages()
    total = sum(a.self_cpu_time_total for a in averages) or 1.0
    ranked = sorted(averages, key=lambda a: a.self_cpu_time_total, reverse=True)
    return {
        "aten_ops_per_call": round(sum(a.count for a in averages if a.key.startswith("aten::"))
                                   / calls),
        "top_self_cpu": [{"op": a.key, "share_pct": round(100 * a.self_cpu_time_total / total, 1),
                          "calls": a.count // calls} for a in ranked[:top]],
    }


def compare(ours: Callable[[], object], theirs: Callable[[], object], repeats: int,
            device: torch.device, extra: dict[str, Callable[[], object]] | None = None,
            round_s: float = 0.05, profile: bool = True) -> dict:
    """Interleaved medians of ``ours`` and ``theirs`` (plus ``extra``), their ratio, profiles.

    Each timed round is about ``round_s`` long; ``profile`` adds the operator profiles.
    """
    fns = {"ours": ours, "torch": theirs, **(extra or {})}
    inner = calls_per_round(fns, round_s=round_s, device=device)
    timed = interleaved_medians(fns, repeats=repeats, warmup=1, inner=inner, device=device)
    result = {
        "ours_s": timed["ours"]["median_s"],
        "torch_s": timed["torch"]["median_s"],
        "ratio": timed["ours"]["median_s"] / timed["torch"]["median_s"],
        "target_ratio": TARGET_RATIO,
        "calls_per_round": inner,
        "rounds": repeats,
        "ours_samples_s": timed["ours"]["samples_s"],
        "torch_samples_s": timed["torch"]["samples_s"],
    }
    for name in extra or {}:
        result[f"{name}_s"] = timed[name]["median_s"]
    if profile and device.type == "cpu":
        result["profile"] = {"ours": profile_ops(ours), "torch": profile_ops(theirs)}
    return result


def fwd_bwd(module: nn.Module, x: torch.Tensor, call: Callable) -> Callable[[], None]:
    """A closure: forward through ``call(module, x)``, sum, backward (grads accumulate)."""
    def step() -> None:
        out = call(module, x)
        out = out[0] if isinstance(out, tuple) else out
        out.sum().backward()
    return step


def bench_mha(ns: dict, cfg: ModelConfig, device: torch.device, repeats: int, **timing) -> dict:
    """The 10.3 ``MultiHeadAttention`` against ``nn.MultiheadAttention``, self-attention."""
    torch.manual_seed(0)
    ours = ns["MultiHeadAttention"](cfg.d_model, cfg.num_heads).to(device)
    theirs = nn.MultiheadAttention(cfg.d_model, cfg.num_heads, batch_first=True).to(device)
    x = torch.randn(cfg.batch, cfg.seq, cfg.d_model, device=device, requires_grad=True)
    result = compare(
        fwd_bwd(ours, x, lambda m, t: m(t, t, t)),
        fwd_bwd(theirs, x, lambda m, t: m(t, t, t, need_weights=True, average_attn_weights=False)),
        repeats, device,
        extra={"torch_no_weights": fwd_bwd(theirs, x, lambda m, t: m(t, t, t, need_weights=False))},
        **timing)
    result["what"] = (f"self-attention forward+backward, x ({cfg.batch}, {cfg.seq}, {cfg.d_model}), "
                      f"{cfg.num_heads} heads, per-head weights returned on both sides")
    return result


def bench_block(ns: dict, cfg: ModelConfig, device: torch.device, repeats: int,
                **timing) -> dict:
    """The 10.5 ``TransformerBlock`` against ``nn.TransformerEncoderLayer`` (post-norm)."""
    torch.manual_seed(0)
    ours = ns["TransformerBlock"](cfg.d_model, cfg.num_heads, cfg.d_ff, dropout=cfg.dropout).to(device)
    theirs = nn.TransformerEncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, dropout=cfg.dropout,
                                        batch_first=True).to(device)
    x = torch.randn(cfg.batch, cfg.seq, cfg.d_model, device=device, requires_grad=True)
    result = compare(fwd_bwd(ours, x, lambda m, t: m(t)), fwd_bwd(theirs, x, lambda m, t: m(t)),
                     repeats, device, **timing)
    result["what"] = (f"encoder layer forward+backward, x ({cfg.batch}, {cfg.seq}, {cfg.d_model}), "
                      f"d_ff {cfg.d_ff}, dropout {cfg.dropout}, post-norm, train mode")
    return result


# ---------------------------------------------------------------- the full model


class TorchSeq2Seq(nn.Module):
    """Embeddings + sinusoidal positions -> ``nn.Transformer`` -> linear to target logits.

    Built to do what the 10.6 ``Transformer`` does: post-norm, ReLU, no final LayerNorm
    after either stack (a post-norm stack ends with its last layer's LayerNorm already),
    unscaled embeddings, the causal mask on the target and the source's padding mask for
    the encoder's self-attention and the cross-attention.
    """

    def __init__(self, n_src: int, n_tgt: int, cfg: ModelConfig, pad: int, max_len: int = 256):
        super().__init__()
        self.pad = pad
        self.src_embed = nn.Embedding(n_src, cfg.d_model)
        self.tgt_embed = nn.Embedding(n_tgt, cfg.d_model)
        self.register_buffer("pe", sinusoidal_table(max_len, cfg.d_model, torch.float32, "cpu"))
        self.transformer = nn.Transformer(cfg.d_model, cfg.num_heads, cfg.num_layers,
                                          cfg.num_layers, cfg.d_ff, cfg.dropout, batch_first=True)
        self.transformer.encoder.norm = None
        self.transformer.decoder.norm = None
        self.out = nn.Linear(cfg.d_model, n_tgt)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        n = tgt.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=tgt.device), diagonal=1)
        padding = src == self.pad  # (B, n_src), True = ignore
        h = self.transformer(
            self.src_embed(src) + self.pe[: src.shape[1]], self.tgt_embed(tgt) + self.pe[:n],
            tgt_mask=causal, src_key_padding_mask=padding, memory_key_padding_mask=padding,
            tgt_is_causal=True)
        return self.out(h)  # (B, n_tgt, n_tgt_vocab)


def translation_batch(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """A real (src, tgt) batch of the course's pairs, the vocabulary sizes and the pad id."""
    from course.translation import PAD, Vocab, load_pairs, make_batches

    pairs = load_pairs(split="train")
    src_vocab = Vocab.from_sentences(fr for fr, _ in pairs)
    tgt_vocab = Vocab.from_sentences(en for _, en in pairs)
    src, tgt = make_batches(pairs, src_vocab, tgt_vocab, cfg.batch, seed=0)[0]
    return src, tgt, len(src_vocab), len(tgt_vocab), PAD


def course_transformer(ns: dict, n_src: int, n_tgt: int, cfg: ModelConfig, pad: int) -> nn.Module:
    """The 10.6 ``Transformer`` built at ``cfg``'s size, by its constructor's parameter names."""
    cls = ns["Transformer"]
    params = inspect.signature(cls).parameters
    values = {
        "src_vocab_size": n_src, "n_src": n_src, "src_vocab": n_src,
        "tgt_vocab_size": n_tgt, "n_tgt": n_tgt, "tgt_vocab": n_tgt,
        "d_model": cfg.d_model, "num_heads": cfg.num_heads, "nhead": cfg.num_heads,
        "heads": cfg.num_heads, "d_ff": cfg.d_ff, "dim_feedforward": cfg.d_ff,
        "num_layers": cfg.num_layers, "num_encoder_layers": cfg.num_layers,
        "num_decoder_layers": cfg.num_layers, "dropout": cfg.dropout,
        "pad_id": pad, "pad": pad, "pad_idx": pad,
    }
    kwargs = {name: values[name] for name in params if name in values}
    missing = [name for name, p in params.items()
               if name not in kwargs and p.default is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        raise TypeError(f"bench does not know how to fill Transformer({', '.join(missing)})")
    return cls(**kwargs)


def _call(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    return model(src, tgt)


def training_step(model: nn.Module, forward: Callable, src: torch.Tensor, tgt: torch.Tensor,
                  pad: int) -> Callable[[], None]:
    """One teacher-forced step as 10.6 trains: forward, cross-entropy on the next token,
    backward, gradient clipping, Adam."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        logits = forward(model, src, tgt_in)  # (B, n_tgt, vocab)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=pad)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return step


def bench_transformer_step(ns: dict, cfg: ModelConfig, device: torch.device, repeats: int,
                           **timing) -> dict:
    """A training step of the 10.6 ``Transformer`` against :class:`TorchSeq2Seq`."""
    src, tgt, n_src, n_tgt, pad = translation_batch(cfg)
    src, tgt = src.to(device), tgt.to(device)
    torch.manual_seed(0)
    ours = course_transformer(ns, n_src, n_tgt, cfg, pad).to(device).train()
    theirs = TorchSeq2Seq(n_src, n_tgt, cfg, pad).to(device).train()
    result = compare(training_step(ours, _call, src, tgt, pad),
                     training_step(theirs, _call, src, tgt, pad), repeats, device, **timing)
    result["what"] = (f"training step (forward, cross-entropy, backward, clipping, Adam), src "
                      f"{tuple(src.shape)}, "
                      f"tgt {tuple(tgt.shape)}, {cfg.num_layers}+{cfg.num_layers} layers, vocab "
                      f"{n_src}/{n_tgt}, dropout {cfg.dropout}")
    result["parameters"] = {"ours": sum(p.numel() for p in ours.parameters()),
                            "torch": sum(p.numel() for p in theirs.parameters())}
    return result


def unavailable(reason: str) -> dict:
    """An entry for a comparison that could not run: null figures and why."""
    return {"ours_s": None, "torch_s": None, "ratio": None, "target_ratio": TARGET_RATIO,
            "reason": reason}


def bench_modules(device: torch.device | str = "cpu", repeats: int = 15, log=print, **timing) -> dict:
    """Every comparison that the solution notebooks present allow, keyed by module name
    (``timing``: :func:`compare`'s ``round_s`` and ``profile``)."""
    device = torch.device(device)
    ns_10_6 = solution(A_10_6)
    cfg = model_config(ns_10_6)
    report: dict = {"config": asdict(cfg)}
    plan = [("multi_head_attention", A_10_3, bench_mha), ("transformer_block", A_10_5, bench_block),
            ("transformer_step", A_10_6, bench_transformer_step)]
    for name, assignment, run in plan:
        ns = ns_10_6 if assignment == A_10_6 else solution(assignment)
        if ns is None:
            report[name] = unavailable(f"solutions/{assignment} does not exist yet")
        else:
            try:
                report[name] = run(ns, cfg, device, repeats, **timing)
            except Exception as error:  # noqa: BLE001 - a benchmark reports what it could not measure
                report[name] = unavailable(f"{type(error).__name__}: {error}")
        entry = report[name]
        log(f"  module {name}: " + (f"ours {entry['ours_s'] * 1e3:.2f} ms, torch "
                                    f"{entry['torch_s'] * 1e3:.2f} ms, ratio {entry['ratio']:.2f}"
                                    if entry["ratio"] is not None else entry["reason"]))
    return report
