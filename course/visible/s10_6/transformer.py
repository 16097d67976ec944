"""``Transformer``: the exercise (encode, decode and forward against PyTorch's layers holding the
case's weights, with the notebook's conventions around them; causality and padding as properties of
the learner's own model), its known mistakes and its visible check."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    close,
    expect_distinct,
    expect_tensor,
    generator,
    passed,
    randn,
    tolerance,
    visible_check,
    with_gradients,
)
from course.checking.blocks import (
    block_parameter_names,
    block_shapes,
    copy_into_torch,
    expect_parameters,
    torch_grads,
    torch_mask,
)
from course.checking.exercise import seeded_parameters
from course.checking.forbidden import ATTENTION, MULTIHEAD
from course.checking.modules import load_parameters
from course.checking.pieces import causal_mask
from course.visible.s10_6.decoder_block import lengths_mask

HOW = ("Follow the notebook's table: src_embed and tgt_embed, two nn.Embedding(vocab size, d_model); "
       "pos_encoding, a PositionalEncoding(d_model, max_len, dropout); encoder_layers and decoder_layers, "
       "nn.ModuleLists of num_encoder_layers TransformerBlocks and num_decoder_layers DecoderBlocks; "
       "encoder_norm and decoder_norm, nn.LayerNorm(d_model) when norm_first=True, else nn.Identity() "
       "(a post-norm block already ends with a LayerNorm); out, an nn.Linear(d_model, tgt_vocab_size).")
PADDING_HINT = ("The source padding mask (padding_mask of the source, with the model's pad_id) goes to every "
                "encoder block, and to every decoder block as its memory_mask.")
FORWARD_HINT = ("forward builds the source padding mask with the model's own pad_id and runs encode, then "
                "decode, with that one mask.")
NO_CAUSAL = Mistake("no_causal", "a decoder without the causal mask",
                    "decode gives every DecoderBlock a causal tgt_mask (of the target's length, on its "
                    "device): while training, position i must not see target tokens after i.")
FUTURE_MASK = Mistake("future_mask", "a decoder whose mask shows each position the future instead of "
                                     "the past",
                      "The decoder's mask is causal: True on and below the diagonal (check that causal_mask "
                      "passes its own test).")
NO_PADDING = Mistake("no_padding", "a model that ignores the source padding", PADDING_HINT)
NO_ENCODER_PADDING = Mistake("no_encoder_padding", "encoder blocks without the source padding mask",
                             PADDING_HINT)
NO_CROSS_PADDING = Mistake("no_cross_padding", "decoder blocks without the source padding mask (memory_mask)",
                           PADDING_HINT)
NO_FINAL_NORM = Mistake("no_final_norm", "pre-norm stacks without their final LayerNorms",
                        "With norm_first=True apply self.encoder_norm to the encoder's output and "
                        "self.decoder_norm before self.out: a pre-norm residual stream is never normalised.")
NO_ENCODER_NORM = Mistake("no_encoder_norm", "a pre-norm encoder without its final LayerNorm",
                          "With norm_first=True encode ends with self.encoder_norm.")
NO_DECODER_NORM = Mistake("no_decoder_norm", "a pre-norm decoder without its final LayerNorm",
                          "With norm_first=True decode applies self.decoder_norm before self.out.")
BLOCK_NORM_FIRST = Mistake("block_norm_first", "blocks that do not get norm_first",
                           "Pass norm_first (and dropout, activation) on to every TransformerBlock and "
                           "DecoderBlock.")
BLOCK_ACTIVATION = Mistake("block_activation", "blocks that do not get the activation",
                           "Pass activation on to every TransformerBlock and DecoderBlock.")
PROBABILITIES = Mistake("probabilities", "probabilities (a softmax) returned instead of logits",
                        "decode returns self.out(...) as it is: the loss and greedy decoding take logits.")
EMB_SCALE = Mistake("emb_scale", "embeddings multiplied by sqrt(d_model)",
                    "This notebook adds the positional encoding to the embeddings as they are: nn.Embedding "
                    "starts with values of size 1 already.")
NO_TGT_POSITIONS = Mistake("no_tgt_positions", "target embeddings without the positional encoding",
                           "Apply self.pos_encoding to the target embeddings too.")
ORDER = ("src_embed", "tgt_embed", "pos_encoding", "encoder_layers", "decoder_layers", "encoder_norm",
         "decoder_norm", "out")  # the notebook's table, in the order of creation
CREATION_ORDER = Mistake(
    "creation_order", "the model's parts created in another order than the notebook's table",
    "The order in which __init__ creates the parts fixes the random numbers each layer starts with (and "
    "the order of model.parameters()): create them in the table's order, " + ", ".join(ORDER) + ".")
NO_SRC_POSITIONS = Mistake("no_src_positions", "source embeddings without the positional encoding",
                           "Apply self.pos_encoding to the source embeddings too.")

MODEL_DIMS = (2, 6, 5, 12, 3, 10, 11, 13)  # B, n_src, n_tgt, d_model, h, d_ff, src and tgt vocabularies
MAX_LEN = 16
OUTPUTS = ("memory", "logits")


def model_case(name: str, seed: int, layers: tuple[int, int], dtype=torch.float64, *,
               norm_first: bool = False, activation: str = "relu", pad: int = 0, padded: bool = True) -> Case:
    """A case: (encoder, decoder) blocks, the options, the pad_id, source padding or not; its kind:
    pre- or post-norm (and no padding), or another pad_id."""
    kind = "pad_id other than 0" if pad else f"{'pre' if norm_first else 'post'}-norm" + \
        ("" if padded else ", no padding")
    return Case(name, seed, {"layers": layers, "norm_first": norm_first, "activation": activation, "pad": pad,
                             "padded": padded}, dtype, kind=kind)


CASES = [
    model_case("post-norm, 2 encoder blocks and 1 decoder block, source padding", 100, (2, 1)),
    model_case("pre-norm (with the final LayerNorms), gelu, 1 + 2 blocks", 101, (1, 2), norm_first=True,
               activation="gelu"),
    model_case("pad_id=3, post-norm, 1 + 1 blocks, float32", 102, (1, 1), torch.float32, pad=3),
    model_case("post-norm, 1 + 1 blocks, no padding", 103, (1, 1), padded=False),
]


def model_options(case: Case) -> dict:
    """A case's activation, norm_first and pad_id (relu, post-norm and 0 unless it says)."""
    return {"activation": case.params.get("activation", "relu"),
            "norm_first": case.params.get("norm_first", False), "pad": case.params.get("pad", 0)}


def transformer_shapes(case: Case) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of the notebook's Transformer for a case."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    n_enc, n_dec = case.params["layers"]
    shapes: dict[str, tuple[int, ...]] = {"src_embed.weight": (v_s, d), "tgt_embed.weight": (v_t, d)}
    for i in range(n_enc):
        shapes.update({f"encoder_layers.{i}.{k}": s for k, s in block_shapes(d, d_ff).items()})
    for i in range(n_dec):
        shapes.update({f"decoder_layers.{i}.{k}": s for k, s in block_shapes(d, d_ff, decoder=True).items()})
    if model_options(case)["norm_first"]:
        for norm in ("encoder_norm", "decoder_norm"):
            shapes.update({f"{norm}.weight": (d,), f"{norm}.bias": (d,)})
    shapes.update({"out.weight": (v_t, d), "out.bias": (v_t,)})
    return shapes


def token_ids(shape, vocab: int, pad: int, g: torch.Generator) -> torch.Tensor:
    """Random ids in [0, vocab) that are never pad."""
    ids = torch.randint(0, vocab - 1, shape, generator=g)
    return ids + (ids >= pad).long()


def inputs(case: Case, device):
    """src (B, n_src) with padding at the end of row 0 (and maybe 1), tgt (B, n_tgt), the seeded
    parameters, and a seeded positional table (max_len, d_model) that both models are given."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    pad, g = case.params["pad"], generator(case.seed)
    src = token_ids((B, n_s), v_s, pad, g)
    if case.params["padded"]:
        src = src.masked_fill(~lengths_mask(B, n_s, g, "cpu")[:, 0, 0, :], pad)
    tgt = token_ids((B, n_t), v_t, pad, g)
    positions = randn((MAX_LEN, d), g, case.dtype, device, scale=0.5)
    params = seeded_parameters(transformer_shapes(case), case, device)
    return src.to(device), tgt.to(device), params, positions


def masked_memory(memory: torch.Tensor, src: torch.Tensor, pad: int) -> torch.Tensor:
    """Memory at real source positions only (what sits at padding is never read)."""
    return memory * (src != pad)[..., None].to(memory.dtype)


def torch_outputs(case: Case, device, *, tgt_mask="causal", encoder_padding=True, cross_padding=True,
                  final_norm=("encoder", "decoder"), scale=1.0, src_positions=True, tgt_positions=True,
                  block_norm_first=None, block_activation=None, probabilities=False, grads=False):
    """Memory (at real tokens) and logits from PyTorch layers holding the case's parameters, with the
    gradients of every parameter when ``grads``; the other keywords switch on one known mistake each."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    src, tgt, p, pe = inputs(case, device)
    norm_first, pad = case.params["norm_first"], case.params["pad"]
    options = {"dim_feedforward": d_ff, "dropout": 0.0, "batch_first": True,
               "activation": block_activation or case.params["activation"],
               "norm_first": norm_first if block_norm_first is None else block_norm_first}
    layers = {f"encoder_layers.{i}.": nn.TransformerEncoderLayer(d, h, **options)
              for i in range(case.params["layers"][0])}
    layers.update({f"decoder_layers.{i}.": nn.TransformerDecoderLayer(d, h, **options)
                   for i in range(case.params["layers"][1])})
    for prefix, layer in layers.items():  # train(): dropout is 0, and PyTorch stays off its fused path
        copy_into_torch(layer.to(device, case.dtype).train(), p, prefix=prefix)
    own = {k: v.requires_grad_() for k, v in p.items()  # embeddings, final norms, out
           if not k.startswith(("encoder_layers.", "decoder_layers."))}
    real = (src != pad)[:, None, None, :]  # (B, 1, 1, n_src), True = a real token

    def norm(x, name):
        return F.layer_norm(x, x.shape[-1:], p[f"{name}.weight"], p[f"{name}.bias"])

    def call():  # masks as per-head attn masks, True = blocked (key padding masks make PyTorch import sympy)
        x = F.embedding(src, p["src_embed.weight"]) * scale + (pe[:n_s] if src_positions else 0)
        for prefix, layer in layers.items():
            if prefix.startswith("encoder"):
                x = layer(x, src_mask=torch_mask(real if encoder_padding else None, B, h, n_s, n_s))
        x = norm(x, "encoder_norm") if norm_first and "encoder" in final_norm else x
        ones = torch.ones(n_t, n_t, dtype=torch.bool, device=device)
        future = {"causal": ones.triu(1), "upper": ones.tril(-1), "none": None}[tgt_mask]  # True = blocked
        y = F.embedding(tgt, p["tgt_embed.weight"]) * scale + (pe[:n_t] if tgt_positions else 0)
        for prefix, layer in layers.items():
            if prefix.startswith("decoder"):
                y = layer(y, x, tgt_mask=future,
                          memory_mask=torch_mask(real if cross_padding else None, B, h, n_t, n_s))
        y = norm(y, "decoder_norm") if norm_first and "decoder" in final_norm else y
        logits = F.linear(y, p["out.weight"], p["out.bias"])  # (B, n_tgt, tgt vocabulary)
        return masked_memory(x, src, pad), logits.softmax(-1) if probabilities else logits

    if not grads:
        with torch.no_grad():
            return dict(zip(OUTPUTS, call()))
    out = with_gradients(call, OUTPUTS, own, case.seed)
    for prefix, layer in layers.items():
        out.update(torch_grads(layer, p, prefix))
    return {k: out[k] for k in (*OUTPUTS, *(f"grad {n}" for n in p))}


def _mistake(**switch):
    return lambda case, device: torch_outputs(case, device, **switch)


def expect_layout(model: nn.Module, case: Case) -> None:
    """The attributes of the notebook's table, distinct, with the contract's parameter names, those that
    hold weights created in the table's order."""
    d, (n_enc, n_dec), norm_first = MODEL_DIMS[3], case.params["layers"], case.params["norm_first"]
    kinds = {"src_embed": nn.Embedding, "tgt_embed": nn.Embedding, "pos_encoding": nn.Module,
             "encoder_layers": nn.ModuleList, "decoder_layers": nn.ModuleList,
             "encoder_norm": nn.LayerNorm if norm_first else nn.Identity,
             "decoder_norm": nn.LayerNorm if norm_first else nn.Identity, "out": nn.Linear}
    for name, kind in kinds.items():
        if not isinstance(getattr(model, name, None), kind):
            raise CheckFailure(f"Transformer(..., norm_first={norm_first}) needs self.{name} = "
                               f"{kind.__name__}(...). {HOW}")
    expect_distinct(model, "Transformer", ("src_embed", "tgt_embed"), HOW)
    for stack, count in (("encoder_layers", n_enc), ("decoder_layers", n_dec)):
        blocks = getattr(model, stack)
        if len(blocks) != count:
            raise CheckFailure(f"Transformer(..., num_encoder_layers={n_enc}, num_decoder_layers={n_dec}) "
                               f"has {len(blocks)} blocks in {stack}, not {count}. {HOW}")
        if len({id(b) for b in blocks}) != len(blocks):
            raise CheckFailure(f"Transformer.{stack} holds one block several times (the same object): every "
                               f"layer needs its own block, created in a loop. {HOW}")
    pe = getattr(model.pos_encoding, "pe", None)
    if not isinstance(pe, torch.Tensor) or tuple(pe.shape) != (MAX_LEN, d):
        raise CheckFailure(f"Transformer(..., max_len={MAX_LEN}) needs pos_encoding, a PositionalEncoding of "
                           "width d_model for max_len positions (with the model's dropout): its table pe of "
                           f"shape ({MAX_LEN}, {d}).")
    want = {"src_embed.weight", "tgt_embed.weight", "out.weight", "out.bias"}
    want |= {f"encoder_layers.{i}.{k}" for i in range(n_enc)
             for k in block_parameter_names(("self_attn",), ("norm1", "norm2"))}
    want |= {f"decoder_layers.{i}.{k}" for i in range(n_dec)
             for k in block_parameter_names(("self_attn", "cross_attn"), ("norm1", "norm2", "norm3"))}
    if norm_first:
        want |= {f"{n}.{k}" for n in ("encoder_norm", "decoder_norm") for k in ("weight", "bias")}
    expect_parameters("Transformer", model, want, HOW)
    have = list(dict.fromkeys(n.split(".")[0] for n, _ in model.named_parameters()))  # those with weights
    if have != [name for name in ORDER if name in have]:
        raise CheckFailure(f"Transformer's parts with weights come in the order {', '.join(have)} (the order "
                           "of model.parameters(), which is the order __init__ assigned them in). "
                           f"{CREATION_ORDER.sentence()}", CREATION_ORDER)


class TransformerModel(Exercise):
    forbidden = ATTENTION | MULTIHEAD
    builds_on = {"causal_mask": causal_mask}  # grading adds padding_mask (grader/checks/s10_6)
    name = "Transformer"
    reference_name = "nn.TransformerEncoderLayer and nn.TransformerDecoderLayer with the same weights"
    mistakes = {NO_CAUSAL: _mistake(tgt_mask="none"), FUTURE_MASK: _mistake(tgt_mask="upper"),
                NO_PADDING: _mistake(encoder_padding=False, cross_padding=False),
                NO_ENCODER_PADDING: _mistake(encoder_padding=False),
                NO_CROSS_PADDING: _mistake(cross_padding=False),
                NO_FINAL_NORM: _mistake(final_norm=()), NO_ENCODER_NORM: _mistake(final_norm=("decoder",)),
                NO_DECODER_NORM: _mistake(final_norm=("encoder",)),
                BLOCK_NORM_FIRST: lambda case, device: torch_outputs(
                    case, device, block_norm_first=not case.params["norm_first"]),
                BLOCK_ACTIVATION: _mistake(block_activation="relu"),
                PROBABILITIES: _mistake(probabilities=True),
                EMB_SCALE: _mistake(scale=math.sqrt(MODEL_DIMS[3])),
                NO_TGT_POSITIONS: _mistake(tgt_positions=False),
                NO_SRC_POSITIONS: _mistake(src_positions=False)}
    visible_cases = CASES

    def build_model(self, impl, case: Case, device) -> nn.Module:
        """The learner's Transformer for ``case``, its layout checked, in eval() mode on ``device``."""
        B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
        n_enc, n_dec = case.params["layers"]
        model = self.build(impl, case, v_s, v_t, d_model=d, num_heads=h, d_ff=d_ff, num_encoder_layers=n_enc,
                           num_decoder_layers=n_dec, dropout=0.0, activation=case.params["activation"],
                           norm_first=case.params["norm_first"], max_len=MAX_LEN, pad_id=case.params["pad"])
        expect_layout(model, case)
        return model.to(device).eval()

    def run(self, impl, case, device):
        model = self.build_model(impl, case, device)
        src, tgt, p, pe = inputs(case, device)
        params = load_parameters(model, p, self.name, HOW)
        with torch.no_grad():
            model.pos_encoding.pe.copy_(pe)
        pad = case.params["pad"]
        src_mask = (src != pad)[:, None, None, :]  # (B, 1, 1, n_src): padding_mask(src, pad_id)

        def call():
            memory = expect_tensor(self.call(case, model.encode, src, src_mask),
                                   "Transformer.encode's result", case)
            logits = expect_tensor(self.call(case, model.decode, tgt, memory, src_mask),
                                   "Transformer.decode's result", case)
            return masked_memory(memory, src, pad), logits

        outputs = with_gradients(call, OUTPUTS, params, case.seed)
        with torch.no_grad():
            whole = expect_tensor(self.call(case, model, src, tgt), "Transformer's output", case)
        if not close(whole, outputs["logits"], *tolerance(case.dtype, device)):
            raise CheckFailure(
                f"Transformer: model(src, tgt) differs from encode, then decode, run with the source padding "
                f"mask of pad_id={pad} in {case}. {FORWARD_HINT}")
        return outputs

    def reference(self, case, device):
        return torch_outputs(case, device, grads=True)

    def extra_checks(self, impl, device):
        """Causality and padding as properties of the learner's own model; tensors made without a device."""
        case = CASES[0]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(case.seed)
            model = self.build_model(impl, case, device)
        src, tgt, _, _ = inputs(case, device)
        self.check_causal(model, src, tgt, case)
        self.check_padding(model, src, tgt, case)

    def logits(self, model, src, tgt, case):
        with torch.no_grad():
            return expect_tensor(self.call(case, model, src, tgt), "Transformer's output", case)

    def check_causal(self, model, src, tgt, case):
        """Changing target tokens k.. never changes the logits at positions before k."""
        k = 2
        changed = tgt.clone()
        changed[:, k:] = (tgt[:, k:] + 1) % MODEL_DIMS[7]
        changed[:, k:] += changed[:, k:] == case.params["pad"]
        before, after = self.logits(model, src, tgt, case), self.logits(model, src, changed, case)
        if not close(after[:, :k], before[:, :k], *tolerance(case.dtype, src.device)):
            raise CheckFailure(
                f"Transformer: changing the target tokens from position {k} on changed the logits "
                f"at positions 0..{k - 1}: the decoder sees the future. {NO_CAUSAL.hint}")

    def check_padding(self, model, src, tgt, case):
        """Appending padding to the source never changes the logits."""
        padded = torch.cat([src, torch.full((src.shape[0], 3), case.params["pad"], device=src.device)], dim=1)
        before, after = self.logits(model, src, tgt, case), self.logits(model, padded, tgt, case)
        if not close(after, before, *tolerance(case.dtype, src.device)):
            raise CheckFailure(
                "Transformer: appending three padding tokens to the source changed the logits: the "
                f"padding leaks into the translation. {PADDING_HINT}")


@visible_check
def check_Transformer(Transformer) -> None:
    """Layout, then encode, decode and forward against PyTorch's layers holding the same weights, with
    the gradients of every parameter: post- and pre-norm, relu and gelu, source padding, another pad_id;
    causality and padding as properties of the model; the parts created in the table's order."""
    TransformerModel().run_cases(Transformer)
    passed("Transformer matches PyTorch's layers with the same weights: post- and pre-norm, padding, pad_id; "
           "its parts that hold weights come in the table's order (pos_encoding holds none: its place is not "
           "checked).")
