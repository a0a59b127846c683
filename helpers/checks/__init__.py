"""The check of every exercise, each declared once with the mistakes it names (see harness.py).

EXERCISES (name -> Exercise) is the registry: the grader, the nbgrader metadata of the notebooks
and the tests read the exercises of each notebook from it.
"""

from .harness import EXERCISES, Exercise, Verdict, exercises_in
from .positional import check_apply_rope, check_create_position_matrix, check_rotation_matrix
from .attention import check_scaled_dot_product_attention, check_softmax
from .multi_head import check_combine_heads, check_multi_head_attention, check_split_heads
from .attention_module import check_multi_head_attention_module
from .masking import check_causal_mask, check_masked_softmax, check_padding_mask
from .layer_norm import check_layer_norm
from .feed_forward import check_feed_forward
from .layers import check_encoder_layer
from .decoder_layer import check_decoder_layer
from .model import check_transformer
from .training import check_label_smoothing_loss, check_transformer_lr
from .train_step import check_train_step
from .greedy import check_greedy_decode

__all__ = ["EXERCISES", "Exercise", "Verdict", "exercises_in", "check_apply_rope", "check_causal_mask",
           "check_combine_heads", "check_create_position_matrix", "check_decoder_layer", "check_encoder_layer",
           "check_feed_forward", "check_greedy_decode", "check_label_smoothing_loss", "check_layer_norm",
           "check_masked_softmax", "check_multi_head_attention", "check_multi_head_attention_module",
           "check_padding_mask", "check_rotation_matrix", "check_scaled_dot_product_attention", "check_softmax",
           "check_split_heads", "check_train_step", "check_transformer", "check_transformer_lr"]
