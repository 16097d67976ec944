"""Hidden check of ``sample`` (defined in its visible module): more settings on the stand-in models,
a float64 model and a float32 one, each step checked against the contract."""

from __future__ import annotations

import torch

from course.visible.s10_8.sample import Sample, sample_case
from grader.checks.exercise import GradedExercise, registered

SETTINGS = [  # name, B, n0, max_new_tokens, temperature, top_k, top_p, eos_id, seed
    ("temperature 0 (greedy), past max_len", 2, 3, 6, 0.0, None, None, None, 10),
    ("temperature 1, one prompt", 1, 2, 4, 1.0, None, None, None, 11),
    ("temperature 1.3, 4 prompts, eos_id=2, up to 12 new", 4, 1, 12, 1.3, None, None, 2, 12),
    ("top_k=2, eos_id=0", 3, 2, 8, 1.0, 2, None, 0, 13),
    ("top_p=0.8, temperature 0.7, eos_id=2", 3, 4, 7, 0.7, None, 0.8, 2, 14),
    ("no new token", 2, 2, 0, 1.0, None, None, 2, 15),
]
CASES = [sample_case(s) for s in SETTINGS] + \
    [sample_case(("float32 model, temperature 1, eos_id=2", 3, 2, 9, 1.0, None, None, 2, 16), torch.float32)]


@registered
class GradedSample(Sample, GradedExercise):
    def cases(self):
        return CASES
