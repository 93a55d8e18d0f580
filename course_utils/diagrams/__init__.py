"""Schematic figures: the pictures a chapter leads with, drawn by code.

Each module draws the diagrams of one topic and returns :class:`matplotlib.figure.Figure` objects
(no ``pyplot``, like :mod:`course_utils.plotting`). Where a picture can be computed from the real
objects (the causal mask from ``attention.causal_mask``, a real digit's patch grid, RoPE rotating a
real query) it is drawn from them rather than by hand. All of them share the colours and drawing
primitives of :mod:`course_utils.diagrams.draw`, so that a query is the same blue in every chapter;
:mod:`course_utils.diagrams.layout` places boxes in rows, columns and grids.

Import the module of a topic, e.g. ``from course_utils.diagrams import attention as pictures``
(:mod:`~course_utils.diagrams.attention`: self-attention, Q/K/V, the scaled dot-product flow and
multi-head attention, chapters 02 and 03; :mod:`~course_utils.diagrams.recurrence`: an RNN's chain of
steps next to self-attention's one step, chapter 01; :mod:`~course_utils.diagrams.vision`: the Vision
Transformer and its patch embedding, chapter 09; :mod:`~course_utils.diagrams.objectives`: GPT's and BERT's
masks and targets, chapter 10).
"""
