import math

import pytest
import torch

from course_utils.attention import MultiHeadAttention
from course_utils.positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    sinusoidal_shift_matrix,
    sinusoidal_table,
)


def test_sinusoidal_values_follow_the_formula():
    table = sinusoidal_table(50, 16)
    pos, i = 7, 3
    assert math.isclose(table[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / 16)), abs_tol=1e-6)
    assert math.isclose(table[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / 16)), abs_tol=1e-6)
    assert sinusoidal_table(10, 7).shape == (10, 7), "odd d_model works (last sine has no cosine partner)"


@pytest.mark.parametrize("k", [1, 5, 37])
def test_sinusoidal_shift_identity(k):
    table = sinusoidal_table(200, 32).double()
    shift = sinusoidal_shift_matrix(k, 32).double()
    torch.testing.assert_close(table[:-k] @ shift.T, table[k:], atol=1e-5, rtol=0)


def test_sinusoidal_module_errors_and_offset():
    pe = SinusoidalPositionalEncoding(8, max_len=10, dropout=0.0)
    x = torch.zeros(1, 4, 8)
    torch.testing.assert_close(pe(x, offset=3)[0], sinusoidal_table(10, 8)[3:7])
    with pytest.raises(ValueError, match="max_len=10"):
        pe(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        pe(torch.zeros(1, 4, 6))


def test_learned_positions_cannot_go_past_max_len():
    pe = LearnedPositionalEncoding(8, max_len=5, dropout=0.0)
    assert pe(torch.zeros(2, 5, 8)).shape == (2, 5, 8)
    with pytest.raises(ValueError, match="positions up to 5 requested but max_len=5"):
        pe(torch.zeros(2, 6, 8))


def test_rope_scores_depend_only_on_relative_position():
    q, k = torch.randn(16), torch.randn(16)

    def score(m, n):
        qm = apply_rotary(q[None], torch.tensor([m]))[0]
        kn = apply_rotary(k[None], torch.tensor([n]))[0]
        return float(qm @ kn)

    for m, n, shift in [(3, 1, 10), (0, 7, 4), (20, 20, 100)]:
        assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-4, abs_tol=1e-4)
    assert not math.isclose(score(3, 1), score(1, 3), abs_tol=1e-3), "direction matters: m - n, not |m - n|"


def test_rope_preserves_norm_and_rejects_odd_dims():
    x = torch.randn(2, 4, 9, 8)
    torch.testing.assert_close(apply_rotary(x).norm(dim=-1), x.norm(dim=-1))
    with pytest.raises(ValueError, match="head_dim=7 is odd"):
        RotaryEmbedding(7)


def test_rope_breaks_permutation_equivariance():
    x = torch.randn(1, 6, 16)
    plain = MultiHeadAttention(16, 2, dropout=0.0).eval()
    rotary = MultiHeadAttention(16, 2, dropout=0.0, rotary=RotaryEmbedding(8)).eval()
    rotary.load_state_dict(plain.state_dict())
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    torch.testing.assert_close(
        plain(x, x, x)[0][:, perm], plain(x[:, perm], x[:, perm], x[:, perm])[0], atol=1e-5, rtol=1e-5
    )
    assert not torch.allclose(rotary(x, x, x)[0][:, perm], rotary(x[:, perm], x[:, perm], x[:, perm])[0], atol=1e-3), (
        "with RoPE, order must matter"
    )
