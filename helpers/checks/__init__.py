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
from .gpt_block import check_gpt_block
from .sampling import check_sample_next, check_temperature_probs, check_top_k_filter, check_top_p_filter
