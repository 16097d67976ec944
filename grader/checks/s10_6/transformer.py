"""Hidden check of ``Transformer`` (defined in its visible module): its kinds again with other stacks,
in float64 and float32, another device, and no attention of PyTorch's."""

from __future__ import annotations

import torch

from course.visible.s10_6.transformer import TransformerModel, model_case
from grader.checks.exercise import GradedExercise, registered
from grader.checks.shared_references import reference_padding_mask

CASES = [
    model_case("post-norm, 2 + 2 blocks, source padding", 731, (2, 2)),
    model_case("pre-norm (with the final LayerNorms), 2 + 2 blocks", 732, (2, 2), norm_first=True),
    model_case("pad_id=3, 2 encoder blocks and 1 decoder block", 734, (2, 1), pad=3),
    model_case("float32, post-norm, 1 + 1 blocks", 735, (1, 1), torch.float32),
]


@registered
class GradedTransformer(TransformerModel, GradedExercise):
    builds_on = {**TransformerModel.builds_on, "padding_mask": reference_padding_mask}  # pieces.py
    own_cases = CASES
