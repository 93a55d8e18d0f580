"""Sequential depth: how many operations must run one after another (chapter 01).

A computation can be wide (many independent multiply-adds) or deep (operations that each need the
result of the one before). Parallel hardware shortens the first and not the second, so a model's
*depth* is the part of its cost that no number of cores removes. Two ways to count it:

- :func:`count_calls` how often a module runs while a function executes (a forward hook): an RNN cell
  runs once per token, a self-attention layer once per sequence.
- :func:`longest_chain` the longest path of operations in an output's autograd graph, which records
  every operation and the results it consumed: the number of operations that must run in order.

Example::

    >>> import torch
    >>> x = torch.ones(3, requires_grad=True)
    >>> longest_chain((x * 2).sin() + x)  # mul -> sin -> add; the shortcut x -> add is shorter
    3
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

__all__ = ["count_calls", "longest_chain"]


def count_calls(module: nn.Module, fn: Callable, *args, **kwargs) -> int:
    """How many times ``module`` runs its forward pass during ``fn(*args, **kwargs)`` (under ``no_grad``).

    >>> cell = nn.RNNCell(4, 4)
    >>> def run(x):  # x (B, T, 4), one cell call per time step
    ...     h = x.new_zeros(x.shape[0], 4)
    ...     for t in range(x.shape[1]):
    ...         h = cell(x[:, t], h)
    >>> count_calls(cell, run, torch.zeros(2, 7, 4))
    7
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"count_calls counts the calls of an nn.Module, got {type(module).__name__}")
    calls = []
    handle = module.register_forward_hook(lambda *hook_args: calls.append(1))
    try:
        with torch.no_grad():
            fn(*args, **kwargs)
    finally:
        handle.remove()  # also when fn fails: a forgotten hook would count the module's later calls
    return len(calls)


def _is_leaf(node) -> bool:
    # AccumulateGrad stores a gradient into a leaf tensor (an input or a parameter): no operation ran.
    return type(node).__name__ == "AccumulateGrad"


def longest_chain(output: torch.Tensor) -> int:
    """The number of operations on the longest path from the inputs to ``output`` in its autograd graph.

    Every operation that produced ``output`` (directly or through intermediate results) is a node of
    the graph; an edge says which result an operation consumed. Operations on the longest path must run
    one after another, whatever the hardware. Reading leaf tensors (inputs, parameters) is not an
    operation and is not counted. The graph is walked without recursion, so chains of any length work.

    ``output`` must have been computed with autograd recording (some input or parameter with
    ``requires_grad=True``, outside ``torch.no_grad()``).
    """
    if not isinstance(output, torch.Tensor):
        raise TypeError(f"longest_chain expects a tensor, got {type(output).__name__}")
    if output.grad_fn is None:
        raise ValueError(
            "the tensor has no autograd graph (grad_fn is None): compute it from a tensor or module "
            "with requires_grad=True, outside torch.no_grad()"
        )
    depth: dict = {}  # node -> operations on the longest path ending at that node (itself included)
    stack = [(output.grad_fn, False)]
    while stack:
        node, inputs_done = stack.pop()
        if node in depth:
            continue
        inputs = [child for child, _ in node.next_functions if child is not None]
        if inputs_done:
            own = 0 if _is_leaf(node) else 1
            depth[node] = own + max((depth[child] for child in inputs), default=0)
        else:
            stack.append((node, True))  # revisit once every input's depth is known (post-order)
            stack.extend((child, False) for child in inputs if child not in depth)
    return depth[output.grad_fn]
