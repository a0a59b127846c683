"""Reference solutions, plots and exercise checks for Transformers from Scratch.

Every notebook imports from here, so a later cell never depends on an exercise the student has
not finished yet.
"""

# Notebook 01: positional encoding
from .positional import PositionalEncoding, frequencies, positional_encoding, rotation_matrix
from .checks import check_create_position_matrix, check_rotation_matrix

# Notebooks 02-04: attention matrices, multi-head attention, masking
from .attention import masked_softmax, scaled_dot_product_attention, softmax
from .masking import (causal_mask, causal_mask_torch, decoder_mask, padding_mask, to_additive_mask,
                      to_nn_multihead_mask)
from .multi_head import (MultiHeadAttention, combine_heads, multi_head_attention, numpy_weights, split_heads,
                         to_nn_multihead_attention)
from .plotting import plot_attention, plot_heads, plot_mask
from .checks import (check_causal_mask, check_combine_heads, check_masked_softmax, check_multi_head_attention,
                     check_padding_mask, check_scaled_dot_product_attention, check_softmax, check_split_heads)

__version__ = "0.1.0"
