"""Every picture of the course, one module a topic; each function returns what it drew on.

    positional.py   the encoding matrix and its columns, binary counting, its properties, RoPE   (notebook 01)
    attention.py    scores, weights, masks, heads, saturation, the cost of attention            (notebooks 02-04)
    training.py     the learning-rate schedule, the loss curve, cross-attention                 (notebooks 05-06)
"""

from .attention import (plot_attention, plot_attention_cost, plot_heads, plot_mask, plot_masking, plot_masks,
                        plot_saturation, plot_scores)
from .positional import (plot_binary_and_sines, plot_bounded_and_unique, plot_dimensions, plot_encoding,
                         plot_encodings, plot_extrapolation, plot_offset_dot_products, plot_scores_along_sentence)
from .training import moving_average, plot_cross_attention, plot_history, plot_schedule

__all__ = ["moving_average", "plot_attention", "plot_attention_cost", "plot_binary_and_sines",
           "plot_bounded_and_unique", "plot_cross_attention", "plot_dimensions", "plot_encoding", "plot_encodings",
           "plot_extrapolation", "plot_heads", "plot_history", "plot_mask", "plot_masking", "plot_masks",
           "plot_offset_dot_products", "plot_saturation", "plot_schedule", "plot_scores",
           "plot_scores_along_sentence"]
