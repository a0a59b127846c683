"""Every picture of the course, one module a topic; each function returns what it drew on.

    positional.py   plot_encoding, plot_dimensions                    (notebook 01)
    attention.py    plot_attention, plot_mask, plot_heads             (notebooks 02-04)
    training.py     plot_schedule, plot_history, plot_cross_attention (notebook 05)
"""

from .attention import plot_attention, plot_heads, plot_mask
from .positional import plot_dimensions, plot_encoding
from .training import moving_average, plot_cross_attention, plot_history, plot_schedule

__all__ = ["moving_average", "plot_attention", "plot_cross_attention", "plot_dimensions", "plot_encoding",
           "plot_heads", "plot_history", "plot_mask", "plot_schedule"]
