"""Hidden check of ``relative_shift_matrix`` (defined in its visible module): M moves the float64
encoding by k positions, and is the block-diagonal rotation built from the addition formulas, which
only grading holds."""

from __future__ import annotations

import torch

from course.checking import angle_tolerance, compare_outputs
from course.visible.s10_4.relative_shift_matrix import (
    ABS_K,
    AGAINST,
    EXPONENT_4I,
    EXPONENT_I,
    HALVES,
    INVERTED,
    SAME_ANGLE,
    TRANSPOSED,
    RelativeShiftMatrix,
)
from grader.checks.exercise import GradedExercise, registered
from grader.checks.guarded_calls import Case, Outputs
from grader.checks.shared_references import F64, encoding, frequencies

SWITCHES = {TRANSPOSED: {"transposed": True}, ABS_K: {"abs_k": True}, EXPONENT_I: {"exponent": "i/d"},
            EXPONENT_4I: {"exponent": "4i/d"}, INVERTED: {"inverted": True}, SAME_ANGLE: {"same_angle": True},
            HALVES: {"halves": True}}


def shift_matrix(k: int, d_model: int, device: torch.device, *, transposed: bool = False,
                 halves: bool = False, same_angle: bool = False, abs_k: bool = False,
                 **omega_mistakes) -> torch.Tensor:
    """M_k in float64, built entry by entry from the addition formulas (and known mistakes)."""
    k = abs(k) if abs_k else k
    omega = frequencies(d_model, device, **omega_mistakes)[: d_model // 2]
    angle = k * (torch.ones_like(omega) if same_angle else omega)
    M = torch.zeros(d_model, d_model, dtype=F64, device=device)
    for i in range(d_model // 2):
        s, c = (i, i + d_model // 2) if halves else (2 * i, 2 * i + 1)
        sign = -1.0 if transposed else 1.0
        M[s, s] = M[c, c] = torch.cos(angle[i])
        M[s, c] = sign * torch.sin(angle[i])
        M[c, s] = -sign * torch.sin(angle[i])
    return M


def shift_positions(k: int, device: torch.device) -> torch.Tensor:
    """Positions pos (with pos + k >= 0) near the start and near 10 000: far beyond any max_len."""
    positions = torch.cat([torch.arange(0, 40), torch.arange(9_960, 10_001)]).to(device, F64)
    return positions[positions + k >= 0]


def _outputs(M: torch.Tensor, case: Case, device: torch.device) -> Outputs:
    pe = encoding(shift_positions(case.params["k"], device), case.params["d_model"])  # (P, d_model), float64
    return {"output": pe @ M.T, "M": M}  # output: M @ pe[pos], row j (M @ pe[pos_j])^T


def _mistake(switch):
    def run(case: Case, device: torch.device) -> Outputs:
        M = shift_matrix(case.params["k"], case.params["d_model"], device, **switch)
        return _outputs(M, case, device)
    return run


@registered
class GradedRelativeShiftMatrix(RelativeShiftMatrix, GradedExercise):
    reference_name = "the formula evaluated in float64"
    mistakes = {mistake: _mistake(switch) for mistake, switch in SWITCHES.items()}

    def run(self, impl, case, device):
        return _outputs(super().run(impl, case, device)["M"], case, device)

    def reference(self, case, device):
        k, d = case.params["k"], case.params["d_model"]
        return {"output": encoding(shift_positions(k, device) + k, d), "M": shift_matrix(k, d, device)}

    def evaluate(self, case, got, device):
        """M @ pe[pos] in the visible check's words, then M itself."""
        k, want = case.params["k"], self.expected(case, device)
        variants = {m: (lambda run=run: run(case, device)) for m, run in self.mistakes.items()
                    if m is not (TRANSPOSED if k < 0 else ABS_K)}  # k < 0: transposed is the shift by |k|
        for key, what, against in (("output", f"M @ pe[pos] for k={k}", AGAINST),
                                   ("M", self.name, "the block-diagonal rotation matrix")):
            compare_outputs(got, {key: want[key]}, what, str(case), atol=2 * angle_tolerance(abs(k) + 1),
                            against=against, variants=variants)
