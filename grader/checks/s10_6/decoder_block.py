"""Hidden check of ``DecoderBlock`` (defined in its visible module): its kinds again with other seeds,
in float64 and float32 (dropout=1.0 in train() mode among them), another device, and no multi-head
attention of PyTorch's."""

from __future__ import annotations

import torch

from course.visible.s10_6.decoder_block import DecoderBlockModule, decoder_case
from grader.checks.exercise import GradedExercise, registered

#: Grading's own, after the visible cases re-seeded.
CASES = [
    decoder_case("post-norm, no masks", 720, "none", False),
    decoder_case("float64, post-norm, causal mask and source padding", 722, "causal", True),
    decoder_case("float32, pre-norm", 727, "causal", True, torch.float32, norm_first=True),
    decoder_case("post-norm, GELU, dropout=1.0 in train() mode", 729, "causal+padding", True,
                 activation="gelu", dropout=1.0, train=True),
    decoder_case("pre-norm, dropout=1.0 in train() mode, float32", 719, "causal", True, torch.float32,
                 norm_first=True, dropout=1.0, train=True),
    decoder_case("pre-norm, gelu, dropout=0.4 in train() mode", 718, "causal+padding", True, norm_first=True,
                 activation="gelu", dropout=0.4, train=True),
]


@registered
class GradedDecoderBlock(DecoderBlockModule, GradedExercise):
    own_cases = CASES
