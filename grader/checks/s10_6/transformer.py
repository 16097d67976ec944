"""Hidden check of ``Transformer``: against ``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` built
from copied layers, with the notebook's conventions around them (embeddings plus the sinusoidal
table, not scaled; a final LayerNorm after each stack only when norm_first=True; a final
nn.Linear); causality and padding also checked as properties of the learner's own model."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_6.transformer import (
    EMB_SCALE,
    FORWARD_HINT,
    FUTURE_MASK,
    HOW,
    NO_CAUSAL,
    NO_CROSS_PADDING,
    NO_ENCODER_PADDING,
    NO_FINAL_NORM,
    NO_PADDING,
    NO_SRC_POSITIONS,
    NO_TGT_POSITIONS,
    PADDING_HINT,
)
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    forward_backward,
    load_parameters,
    registered,
    seeded_parameters,
)
from grader.checks.guarded_calls import (
    Case,
    CheckFailure,
    Outputs,
    call_learner,
    close,
    expect_tensor,
    generator,
    tolerance,
)
from grader.checks.s10_6.decoder_block import FORBIDDEN, lengths_mask
from grader.checks.s10_6.functional import (
    block_shapes,
    copy_into_torch_layer,
    functional_decoder_block,
    functional_encoder_block,
    layer_norm,
    torch_layer_grads,
)
from grader.checks.shared_references import sinusoidal_table

# B, n_src, n_tgt, d_model, h, d_ff, src vocabulary, tgt vocabulary: every dimension differs.
MODEL_DIMS = (2, 6, 5, 12, 3, 10, 11, 13)
MAX_LEN = 16
TRANSFORMER_CASES = [
    Case("post-norm, 1 encoder and 1 decoder block, no padding", 730,
         {"layers": (1, 1), "padded": False}),
    Case("post-norm, 2 + 2 blocks, source padding", 731, {"layers": (2, 2)}),
    Case("pre-norm (with the final LayerNorms), 2 + 2 blocks", 732,
         {"layers": (2, 2), "norm_first": True}),
    Case("pre-norm, GELU, 1 encoder and 2 decoder blocks", 733,
         {"layers": (1, 2), "norm_first": True, "activation": "gelu"}),
    Case("pad_id=3, 2 encoder blocks and 1 decoder block", 734, {"layers": (2, 1), "pad": 3}),
    Case("float32, post-norm, 1 + 1 blocks", 735, {"layers": (1, 1)}, dtype=torch.float32),
]


def model_options(case: Case) -> dict:
    return {"activation": case.params.get("activation", "relu"),
            "norm_first": case.params.get("norm_first", False), "pad": case.params.get("pad", 0)}


def transformer_shapes(case: Case) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of the notebook's Transformer for a case."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    n_enc, n_dec = case.params["layers"]
    shapes: dict[str, tuple[int, ...]] = {"src_embed.weight": (v_s, d), "tgt_embed.weight": (v_t, d)}
    for i in range(n_enc):
        shapes.update({f"encoder_layers.{i}.{k}": s for k, s in block_shapes(d, d_ff, False).items()})
    for i in range(n_dec):
        shapes.update({f"decoder_layers.{i}.{k}": s for k, s in block_shapes(d, d_ff, True).items()})
    if model_options(case)["norm_first"]:
        for norm in ("encoder_norm", "decoder_norm"):
            shapes.update({f"{norm}.weight": (d,), f"{norm}.bias": (d,)})
    shapes.update({"out.weight": (v_t, d), "out.bias": (v_t,)})
    return shapes


def token_ids(shape, vocab: int, pad: int, g: torch.Generator) -> torch.Tensor:
    """Random ids in [0, vocab) that are never pad."""
    ids = torch.randint(0, vocab - 1, shape, generator=g)
    return ids + (ids >= pad).long()


def transformer_inputs(case: Case, device):
    """src (B, n_src) with padding at the end of row 0 (and maybe 1), tgt (B, n_tgt), parameters."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    pad = model_options(case)["pad"]
    g = generator(case.seed)
    src = token_ids((B, n_s), v_s, pad, g)
    if case.params.get("padded", True):
        keep = lengths_mask(B, n_s, g, "cpu")[:, 0, 0, :]  # (B, n_src)
        src = src.masked_fill(~keep, pad)
    tgt = token_ids((B, n_t), v_t, pad, g)
    params = seeded_parameters(transformer_shapes(case), case, device)
    return src.to(device), tgt.to(device), params


def source_mask(src: torch.Tensor, pad: int) -> torch.Tensor:
    return (src != pad)[:, None, None, :]  # (B, 1, 1, n_src)


TRANSFORMER_SWITCHES = {
    "tgt_mask": "causal", "encoder_padding": True, "cross_padding": True, "final_norm": True,
    "emb_scale": False, "src_positions": True, "tgt_positions": True,
}


def functional_transformer(src, tgt, p, case: Case, **switch):
    """The notebook's Transformer from primitives: (memory, logits); ``switch``: one mistake."""
    s = {**TRANSFORMER_SWITCHES, **switch}
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    o = model_options(case)
    pe = sinusoidal_table(MAX_LEN, d, p["out.weight"].dtype, src.device)
    scale = math.sqrt(d) if s["emb_scale"] else 1.0
    keep = source_mask(src, o["pad"])
    x = F.embedding(src, p["src_embed.weight"]) * scale + (pe[:n_s] if s["src_positions"] else 0)
    for i in range(case.params["layers"][0]):
        x = functional_encoder_block(x, p, f"encoder_layers.{i}.", h,
                                     keep if s["encoder_padding"] else None, o["activation"],
                                     o["norm_first"])
    final = o["norm_first"] and s["final_norm"]
    memory = layer_norm(x, p, "encoder_norm") if final else x
    ones = torch.ones(n_t, n_t, dtype=torch.bool, device=src.device)
    tgt_mask = {"causal": ones.tril(), "upper": ones.triu(), "none": None}[s["tgt_mask"]]
    y = F.embedding(tgt, p["tgt_embed.weight"]) * scale + (pe[:n_t] if s["tgt_positions"] else 0)
    for i in range(case.params["layers"][1]):
        y = functional_decoder_block(y, memory, p, f"decoder_layers.{i}.", h,
                                     tgt_mask,
                                     keep if s["cross_padding"] else None, o["activation"],
                                     o["norm_first"])
    y = layer_norm(y, p, "decoder_norm") if final else y
    return memory, F.linear(y, p["out.weight"], p["out.bias"])


def _masked_memory(memory: torch.Tensor, src: torch.Tensor, pad: int) -> torch.Tensor:
    """Memory at real source positions only (what sits at padding is never read)."""
    return memory * (src != pad)[..., None].to(memory.dtype)


MODEL_NAMES = ("memory", "logits")


def _functional_transformer_outputs(case, device, **switch) -> Outputs:
    src, tgt, p = transformer_inputs(case, device)
    leaves = {k: v.requires_grad_() for k, v in p.items()}

    def call():
        memory, logits = functional_transformer(src, tgt, p, case, **switch)
        return _masked_memory(memory, src, model_options(case)["pad"]), logits

    return forward_backward(call, MODEL_NAMES, leaves, case.seed)


def _mistake(**switch):
    return lambda case, device: _functional_transformer_outputs(case, device, **switch)


MISTAKES = {NO_CAUSAL: _mistake(tgt_mask="none"), FUTURE_MASK: _mistake(tgt_mask="upper"),
            NO_PADDING: _mistake(encoder_padding=False, cross_padding=False),
            NO_ENCODER_PADDING: _mistake(encoder_padding=False),
            NO_CROSS_PADDING: _mistake(cross_padding=False),
            NO_FINAL_NORM: _mistake(final_norm=False), EMB_SCALE: _mistake(emb_scale=True),
            NO_TGT_POSITIONS: _mistake(tgt_positions=False), NO_SRC_POSITIONS: _mistake(src_positions=False)}


def _build_transformer(impl, case: Case, exercise: str, device):
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    o = model_options(case)
    n_enc, n_dec = case.params["layers"]
    model = build_module(exercise, FORBIDDEN, case, impl, v_s, v_t, d_model=d, num_heads=h,
                         d_ff=d_ff, num_encoder_layers=n_enc, num_decoder_layers=n_dec,
                         dropout=0.0, activation=o["activation"], norm_first=o["norm_first"],
                         max_len=MAX_LEN, pad_id=o["pad"])
    return model.to(device).eval()


def _use_reference_positions(model: nn.Module, case: Case, device) -> None:
    """Give the model the float64 sinusoid, so 10.4's rounding does not count here."""
    pe = getattr(getattr(model, "pos_encoding", None), "pe", None)
    d = MODEL_DIMS[3]
    if not isinstance(pe, torch.Tensor) or pe.numel() != MAX_LEN * d:
        raise CheckFailure("Transformer needs self.pos_encoding = PositionalEncoding(d_model, max_len, "
                           f"dropout) with its (max_len, d_model) table in the buffer pe. {HOW}")
    with torch.no_grad():
        pe.copy_(sinusoidal_table(MAX_LEN, d, case.dtype, device).view_as(pe))


@registered
class TransformerModel(Exercise):
    name = "Transformer"
    reference_name = "nn.TransformerEncoder and nn.TransformerDecoder"
    forbidden = FORBIDDEN
    mistakes = MISTAKES

    def cases(self):
        return TRANSFORMER_CASES

    def run(self, impl, case, device):
        model = _build_transformer(impl, case, self.name, device)
        src, tgt, p = transformer_inputs(case, device)
        params = load_parameters(model, p, self.name, HOW)
        _use_reference_positions(model, case, device)
        pad = model_options(case)["pad"]
        src_mask = source_mask(src, pad)

        def call():
            memory = expect_tensor(call_learner(self.name, self.forbidden, case, model.encode, src,
                                                src_mask), "Transformer.encode's result", case)
            logits = expect_tensor(call_learner(self.name, self.forbidden, case, model.decode, tgt,
                                                memory, src_mask), "Transformer.decode's result", case)
            return _masked_memory(memory, src, pad), logits

        outputs = forward_backward(call, MODEL_NAMES, params, case.seed)
        with torch.no_grad():
            whole = call_learner(self.name, self.forbidden, case, model, src, tgt)
        rtol, atol = tolerance(case.dtype, device)
        if not close(expect_tensor(whole, "Transformer's output", case), outputs["logits"], rtol, atol):
            raise CheckFailure(
                f"Transformer: model(src, tgt) differs from model.decode(tgt, model.encode(src, "
                f"src_mask), src_mask) with src_mask = padding_mask(src, pad_id={pad}) in {case}. "
                + FORWARD_HINT)
        return outputs

    def reference(self, case, device):
        B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
        o = model_options(case)
        n_enc, n_dec = case.params["layers"]
        src, tgt, p = transformer_inputs(case, device)
        layer_options = {"dim_feedforward": d_ff, "dropout": 0.0, "activation": o["activation"],
                         "batch_first": True, "norm_first": o["norm_first"]}
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, **layer_options), n_enc,
                                        enable_nested_tensor=False).to(device, case.dtype).eval()
        decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, **layer_options),
                                        n_dec).to(device, case.dtype).eval()
        layers = {f"encoder_layers.{i}.": layer for i, layer in enumerate(encoder.layers)}
        layers.update({f"decoder_layers.{i}.": layer for i, layer in enumerate(decoder.layers)})
        for prefix, layer in layers.items():
            copy_into_torch_layer(layer, p, prefix)
        own = {k: v.requires_grad_() for k, v in p.items()  # embeddings, final norms, out
               if not k.startswith(("encoder_layers.", "decoder_layers."))}
        pe = sinusoidal_table(MAX_LEN, d, case.dtype, device)
        blocked = src == o["pad"]  # torch's key padding mask: True = ignore
        causal = torch.ones(n_t, n_t, dtype=torch.bool, device=device).triu(1)  # True = future

        def call():
            memory = encoder(F.embedding(src, p["src_embed.weight"]) + pe[:n_s],
                             src_key_padding_mask=blocked)
            if o["norm_first"]:
                memory = layer_norm(memory, p, "encoder_norm")
            y = decoder(F.embedding(tgt, p["tgt_embed.weight"]) + pe[:n_t], memory, tgt_mask=causal,
                        memory_key_padding_mask=blocked)
            if o["norm_first"]:
                y = layer_norm(y, p, "decoder_norm")
            return _masked_memory(memory, src, o["pad"]), F.linear(y, p["out.weight"], p["out.bias"])

        outputs = forward_backward(call, MODEL_NAMES, own, case.seed)
        for prefix, layer in layers.items():
            outputs.update(torch_layer_grads(layer, p, prefix))
        return {k: outputs[k] for k in (*MODEL_NAMES, *(f"grad {n}" for n in p))}

    def extra_checks(self, impl, device):
        case = TRANSFORMER_CASES[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(case.seed)
            model = _build_transformer(impl, case, self.name, device)
        src, tgt, _ = transformer_inputs(case, device)
        self._check_causal(model, src, tgt, case)
        self._check_padding(model, src, tgt, case)

        def on(dev):
            meta_model = _build_transformer(impl, case, self.name, dev)
            meta_model(src.to(dev), tgt.to(dev))

        check_device_independence(self.name, on)

    def _logits(self, model, src, tgt, case):
        with torch.no_grad():
            return expect_tensor(call_learner(self.name, self.forbidden, case, model, src, tgt),
                                 "Transformer's output", case)

    def _check_causal(self, model, src, tgt, case):
        """Changing target tokens k.. never changes the logits at positions before k."""
        k = 2
        changed = tgt.clone()
        changed[:, k:] = (tgt[:, k:] + 1) % MODEL_DIMS[7]
        changed[:, k:] += changed[:, k:] == model_options(case)["pad"]
        before, after = self._logits(model, src, tgt, case), self._logits(model, src, changed, case)
        if not close(after[:, :k], before[:, :k], *tolerance(case.dtype, src.device)):
            raise CheckFailure(
                f"Transformer: changing the target tokens from position {k} on changed the logits "
                f"at positions 0..{k - 1}: the decoder sees the future. Build causal_mask(n_tgt, "
                "device=tgt.device) in decode and pass it as tgt_mask to every DecoderBlock.")

    def _check_padding(self, model, src, tgt, case):
        """Appending padding to the source never changes the logits."""
        pad = model_options(case)["pad"]
        padded = torch.cat([src, torch.full((src.shape[0], 3), pad, device=src.device)], dim=1)
        before, after = self._logits(model, src, tgt, case), self._logits(model, padded, tgt, case)
        if not close(after, before, *tolerance(case.dtype, src.device)):
            raise CheckFailure(
                "Transformer: appending three padding tokens to the source changed the logits: the "
                f"padding leaks into the translation. {PADDING_HINT}")

