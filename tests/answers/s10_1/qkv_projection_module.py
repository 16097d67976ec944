"""QKVProjection: right answers written differently, and planted bugs."""

from torch import nn

from course.visible.s10_1.qkv_projection_module import K_FROM_W_Q, SWAPPED_LAYERS
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "QKVProjection"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'products, views and activations a right answer runs too (F.linear is forbidden by name)'


class WithBias(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.w_q, self.w_k = nn.Linear(d_model, d_k), nn.Linear(d_model, d_k)
        self.w_v = nn.Linear(d_model, d_v)

    def forward(self, x):
        return self.w_q(x), self.w_k(x), self.w_v(x)


class Separate(nn.Module):
    """Three separate layers, as the contract asks."""

    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)


class Matmul(Separate):
    """A right answer: the layers' weights used directly."""

    def forward(self, x):
        return tuple(x @ layer.weight.T for layer in (self.w_q, self.w_k, self.w_v))


class ValueTooNarrow(WithBias):
    def __init__(self, d_model, d_k, d_v):
        nn.Module.__init__(self)
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)


class KeyFromQuery(Separate):
    def forward(self, x):
        return self.w_q(x), self.w_q(x), self.w_v(x)


class SwappedForward(Separate):
    def forward(self, x):
        return self.w_k(x), self.w_q(x), self.w_v(x)


class Aliased(Separate):
    """w_k is the same module as w_q: two names, one weight."""

    def __init__(self, d_model, d_k, d_v):
        super().__init__(d_model, d_k, d_v)
        self.w_k = self.w_q

    def forward(self, x):
        return self.w_q(x), self.w_k(x), self.w_v(x)


def answers(solution):
    return [
        right("solution", solution["QKVProjection"]),
        right("QKVMatmul", Matmul),
        bug("WithBias", WithBias, hidden="should not have a bias"),
        bug("ValueTooNarrow", ValueTooNarrow, hidden=r"w_v.weight should have shape \(6, 5\)"),
        bug("KeyFromQuery", KeyFromQuery, hidden="K differs", mistake=K_FROM_W_Q),
        bug("QKVAliased", Aliased),
        bug("QKVSwappedForward", SwappedForward, mistake=SWAPPED_LAYERS),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["QKVProjection"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
