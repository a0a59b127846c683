"""Exercise checks: one function per exercise, each printing one line and returning True/False.

EXERCISES lists, per notebook, the exercises its check cells report (the grader uses it to
notice a check cell that never ran).
"""

from .core import exercise_check, report
from .positional import check_create_position_matrix, check_rotation_matrix
from .attention import check_scaled_dot_product_attention, check_softmax
from .multi_head import check_combine_heads, check_multi_head_attention, check_split_heads
from .masking import check_causal_mask, check_masked_softmax, check_padding_mask
from .transformer import check_decoder_layer, check_encoder_layer, check_greedy_decode

EXERCISES = {
    "01_positional_encoding": ["create_position_matrix", "rotation_matrix"],
    "02_attention": ["softmax", "scaled_dot_product_attention"],
    "03_multi_head_attention": ["split_heads", "combine_heads", "multi_head_attention"],
    "04_masking": ["causal_mask", "padding_mask", "masked_softmax"],
    "05_transformer": ["encoder_layer", "decoder_layer", "greedy_decode"],
}
