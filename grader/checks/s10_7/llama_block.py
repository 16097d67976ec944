"""Hidden check of ``LlamaBlock`` (defined in its visible module): its kinds again with other sizes and
options, in float64 and float32, another device, and no attention of PyTorch's."""

from __future__ import annotations

import torch

from course.visible.s10_7.llama_block import Config, LlamaBlockModule, block_case
from grader.checks.exercise import GradedExercise, registered

CASES = [
    block_case("one head, causal, float64", 960, Config(6, 1, 8), 2, 4, "causal", kind="causal mask"),
    block_case("2 heads, no mask, eps=0.5, float64", 961, Config(8, 2, 5, 0.5), 3, 5, None,
               kind="no mask, another eps"),
    block_case("4 heads of 4, causal and padding, base=50, float64", 962, Config(16, 4, 20, None, 50.0), 2, 7,
               "padded", kind="causal and padding mask, another base"),
    block_case("2 heads of 4, causal and padding, float64", 964, Config(8, 2, 12), 3, 5, "padded",
               kind="causal and padding mask"),
    block_case("one token, float64", 963, Config(4, 2, 6), 2, 1, "causal", kind="one token"),
    block_case("float32, 2 heads of 6, causal", 970, Config(12, 2, 16), 2, 6, "causal", torch.float32,
               kind="causal mask"),
]


@registered
class GradedLlamaBlock(LlamaBlockModule, GradedExercise):

    def cases(self):
        return CASES
