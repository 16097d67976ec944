"""Hidden check of ``DecoderBlock``: against ``nn.TransformerDecoderLayer(batch_first=True)`` with the
learner's (seeded) weights copied in and the masks converted to its polarity (True = blocked)."""

from __future__ import annotations

import torch
from torch import nn

from course.checking.blocks import expect_no_dropout_in_eval, torch_mask
from course.visible.s10_6.decoder_block import (
    ALWAYS_POST,
    ALWAYS_PRE,
    CROSS_FROM_X,
    HOW,
    NO_CROSS_RESIDUAL,
    NO_MEMORY_MASK,
    NO_NORM3,
    NO_TGT_MASK,
    NORM2_TWICE,
    NORM_MEMORY,
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
    expect_tensor,
    generator,
    randn,
)
from grader.checks.s10_6.functional import (
    block_shapes,
    copy_into_torch_layer,
    functional_decoder_block,
    torch_layer_grads,
)
from grader.checks.tripwire import ATTENTION, MULTIHEAD

FORBIDDEN = ATTENTION | MULTIHEAD
# B, n_tgt, n_src, d_model, h, d_ff: every dimension differs.
DIMS = (2, 4, 5, 12, 3, 10)
DECODER_CASES = [
    Case("post-norm, no masks", 720, {"mask": "none", "memory_mask": False}),
    Case("post-norm, causal target mask", 721, {"mask": "causal", "memory_mask": False}),
    Case("post-norm, causal mask and source padding", 722, {"mask": "causal", "memory_mask": True}),
    Case("pre-norm, causal mask and source padding", 723,
         {"mask": "causal", "memory_mask": True, "norm_first": True}),
    Case("pre-norm, GELU, target padding too", 724,
         {"mask": "causal+padding", "memory_mask": True, "norm_first": True, "activation": "gelu"}),
    Case("post-norm, GELU, source padding only", 725,
         {"mask": "none", "memory_mask": True, "activation": "gelu"}),
    Case("dropout=0.1 in eval() mode", 726, {"mask": "causal", "memory_mask": True, "dropout": 0.1}),
    Case("float32, pre-norm", 727, {"mask": "causal", "memory_mask": True, "norm_first": True},
         dtype=torch.float32),
    Case("float32, post-norm", 728, {"mask": "causal", "memory_mask": True}, dtype=torch.float32),
]


def lengths_mask(B: int, n: int, g: torch.Generator, device) -> torch.Tensor:
    """(B, 1, 1, n): the first row is padded by 2, the others by 0 to 2; never fully padded."""
    lengths = torch.randint(n - 2, n + 1, (B,), generator=g)
    lengths[0] = n - 2
    return (torch.arange(n) < lengths[:, None])[:, None, None, :].to(device)


def decoder_inputs(case: Case, device):
    """x, memory (leaves), tgt_mask, memory_mask and the seeded parameters of a case."""
    B, n_t, n_s, d, h, d_ff = DIMS
    g = generator(case.seed)
    x = randn((B, n_t, d), g, case.dtype, device).requires_grad_()
    memory = randn((B, n_s, d), g, case.dtype, device).requires_grad_()
    kind = case.params["mask"]
    tgt_mask = None
    if kind != "none":
        tgt_mask = torch.ones(n_t, n_t, dtype=torch.bool, device=device).tril()
        if kind == "causal+padding":
            tgt_mask = lengths_mask(B, n_t, g, device) & tgt_mask  # (B, 1, n_t, n_t)
    memory_mask = lengths_mask(B, n_s, g, device) if case.params["memory_mask"] else None
    params = seeded_parameters(block_shapes(d, d_ff, decoder=True), case, device)
    return x, memory, tgt_mask, memory_mask, params


def _decoder_options(case: Case) -> dict:
    return {"activation": case.params.get("activation", "relu"),
            "norm_first": case.params.get("norm_first", False)}


def _functional_decoder_outputs(case, device, **switch) -> Outputs:
    B, n_t, n_s, d, h, d_ff = DIMS
    x, memory, tgt_mask, memory_mask, p = decoder_inputs(case, device)
    leaves = {"x": x, "memory": memory, **{k: v.requires_grad_() for k, v in p.items()}}
    o = _decoder_options(case)

    def call():
        return (functional_decoder_block(x, memory, p, "", h, tgt_mask, memory_mask,
                                         o["activation"], o["norm_first"], **switch),)

    return forward_backward(call, ("output",), leaves, case.seed)




def _mistake(**switch):
    return lambda case, device: _functional_decoder_outputs(case, device, **switch)


SHAPE_HINT = ("Check the shapes: x is (B, n_tgt, d_model) and memory (B, n_src, d_model); the "
              "queries of both attentions come from x, the cross-attention's keys and values "
              "from memory, and the output has the shape of x.")


@registered
class DecoderBlockModule(Exercise):
    name = "DecoderBlock"
    reference_name = "nn.TransformerDecoderLayer"
    forbidden = FORBIDDEN
    mistakes = {CROSS_FROM_X: _mistake(cross_from="x"), NO_NORM3: _mistake(norm3="none"),
                NORM2_TWICE: _mistake(norm3="norm2"), NO_TGT_MASK: _mistake(use_tgt_mask=False),
                NO_MEMORY_MASK: _mistake(use_memory_mask=False), NORM_MEMORY: _mistake(norm_memory=True),
                NO_CROSS_RESIDUAL: _mistake(cross_residual=False),
                ALWAYS_POST: _mistake(force_norm_first=False),
                ALWAYS_PRE: _mistake(force_norm_first=True)}

    def cases(self):
        return DECODER_CASES

    def run(self, impl, case, device):
        B, n_t, n_s, d, h, d_ff = DIMS
        o = _decoder_options(case)
        dropout = case.params.get("dropout", 0.0)
        block = build_module(self.name, self.forbidden, case, impl, d, h, d_ff, dropout=dropout, **o)
        block.to(device).eval()
        x, memory, tgt_mask, memory_mask, p = decoder_inputs(case, device)
        params = load_parameters(block, p, self.name, HOW)

        def call():
            try:
                out = call_learner(self.name, self.forbidden, case, block, x, memory,
                                   tgt_mask=tgt_mask, memory_mask=memory_mask)
            except CheckFailure as failure:
                if "must match the size" not in str(failure):
                    raise
                raise CheckFailure(f"{failure} {SHAPE_HINT}") from None
            return (expect_tensor(out, "DecoderBlock's output", case),)

        if dropout:
            with torch.no_grad():
                expect_no_dropout_in_eval(f"DecoderBlock(..., dropout={dropout})", lambda: call()[0],
                                          str(case))
        return forward_backward(call, ("output",), {"x": x, "memory": memory, **params}, case.seed)

    def reference(self, case, device):
        B, n_t, n_s, d, h, d_ff = DIMS
        o = _decoder_options(case)
        x, memory, tgt_mask, memory_mask, p = decoder_inputs(case, device)
        layer = nn.TransformerDecoderLayer(d, h, d_ff, dropout=case.params.get("dropout", 0.0),
                                           activation=o["activation"], batch_first=True,
                                           norm_first=o["norm_first"]).to(device, case.dtype).eval()
        copy_into_torch_layer(layer, p)

        def call():
            return (layer(x, memory, tgt_mask=torch_mask(tgt_mask, B, h, n_t, n_t),
                          memory_mask=torch_mask(memory_mask, B, h, n_t, n_s)),)

        outputs = forward_backward(call, ("output",), {"x": x, "memory": memory}, case.seed)
        return {**outputs, **torch_layer_grads(layer, p)}

    def evaluate(self, case, got, device):
        want = (DIMS[0], DIMS[1], DIMS[3])
        if tuple(got["output"].shape) != want:
            raise CheckFailure(
                f"DecoderBlock's output should have the shape of x, {want} = (B, n_tgt, d_model), "
                f"in {case}, but has {tuple(got['output'].shape)}. {SHAPE_HINT}")
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        def on(dev):
            block = impl(8, 2, 6).to(dev)
            x, memory = torch.zeros(2, 3, 8, device=dev), torch.zeros(2, 5, 8, device=dev)
            block(x, memory, tgt_mask=torch.ones(3, 3, dtype=torch.bool, device=dev).tril(),
                  memory_mask=torch.ones(2, 1, 1, 5, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)
