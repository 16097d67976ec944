"""Hidden check of ``GPT`` (defined in its visible module): its kinds again with other stacks, heads
and pad_id's, in float64 and float32, dropout on another model and at another rate, another device, and
no attention of PyTorch's."""

from __future__ import annotations

import torch

from course.visible.s10_7.gpt import Config, GPTModel, gpt_case
from grader.checks.exercise import GradedExercise, registered

CASES = [
    gpt_case("two blocks, 2 heads, padding", 901, Config(13, 8, 2, 16, 2, 9, 0), 3, 7, 3, kind="padding"),
    gpt_case("three blocks, 4 heads, pad_id=5, n = max_len", 902, Config(10, 8, 4, 12, 3, 6, 5), 2, 6, 2,
             kind="n = max_len"),
    gpt_case("one token", 903, Config(6, 4, 2, 8, 2, 4, 1), 2, 1, 0, kind="one token"),
    gpt_case("float32, two blocks, padding", 920, Config(11, 8, 2, 16, 2, 8, 3), 2, 8, 2, torch.float32,
             kind="padding"),
    gpt_case("three blocks, dropout=0.4 in train() mode", 921, Config(10, 8, 4, 12, 3, 6, 5), 2, 6, 0,
             dropout=0.4),
]


@registered
class GradedGPT(GPTModel, GradedExercise):
    dropout_config = Config(7, 6, 3, 12, 3, 5, 2)
    own_cases = CASES
