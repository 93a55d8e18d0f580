"""course_utils.depth: module calls counted by a hook, and the longest chain of operations in an
autograd graph (chapter 01's count of sequential steps)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils.attention import MultiHeadAttention
from course_utils.depth import count_calls, longest_chain


def test_a_chain_of_k_operations_has_depth_k():
    x = torch.randn(3, requires_grad=True)
    for k in (1, 2, 7):
        y = x
        for _ in range(k):
            y = y * 1.5
        assert longest_chain(y) == k, "reading the leaf x is not an operation"


def test_the_longest_of_two_branches_counts():
    x = torch.randn(3, requires_grad=True)
    short = x.exp()  # 1 operation
    long = x.sin().cos().tanh().relu()  # 4 operations
    assert longest_chain(short + long) == 5
    assert longest_chain(long + short) == 5, "the order of the inputs does not matter"
    assert longest_chain(short * short) == 2, "a result used twice is one operation, not two"


def test_a_very_long_chain_needs_no_recursion():
    x = torch.randn(2, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y + 1.0
    assert longest_chain(y) == 5000


def test_an_rnn_loop_grows_with_the_length_and_attention_does_not():
    torch.manual_seed(0)
    cell, attention = nn.RNNCell(8, 8), MultiHeadAttention(8, 2, dropout=0.0)

    def rnn(x):
        h = x.new_zeros(x.shape[0], 8)
        for t in range(x.shape[1]):
            h = cell(x[:, t], h)
        return h

    rnn_chain = [longest_chain(rnn(torch.randn(1, n, 8))) for n in (4, 8, 16)]
    per_step = rnn_chain[1] - rnn_chain[0]
    assert per_step > 0 and rnn_chain[2] - rnn_chain[1] == 2 * per_step, f"a constant number per step: {rnn_chain}"
    attention_chain = {longest_chain(attention(x, x, x)[0]) for x in (torch.randn(1, n, 8) for n in (4, 8, 16))}
    assert len(attention_chain) == 1, f"self-attention's chain should not depend on n, got {attention_chain}"


def test_longest_chain_rejects_a_tensor_without_graph():
    with pytest.raises(ValueError, match="no autograd graph"):
        longest_chain(torch.randn(3))
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        y = x * 2
    with pytest.raises(ValueError, match="no autograd graph"):
        longest_chain(y)
    with pytest.raises(TypeError, match="expects a tensor"):
        longest_chain([x])


def test_count_calls_counts_forward_passes_and_removes_its_hook():
    cell = nn.RNNCell(4, 4)

    def run(x):
        h = x.new_zeros(x.shape[0], 4)
        for t in range(x.shape[1]):
            h = cell(x[:, t], h)
        return h

    assert count_calls(cell, run, torch.zeros(2, 9, 4)) == 9
    assert not cell._forward_hooks, "the hook must be removed afterwards"
    assert count_calls(cell, lambda: None) == 0

    def failing(x):
        cell(x)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        count_calls(cell, failing, torch.zeros(1, 4))
    assert not cell._forward_hooks, "the hook must be removed even when the function fails"
    with pytest.raises(TypeError, match="nn.Module"):
        count_calls(run, run, torch.zeros(1, 1, 4))
