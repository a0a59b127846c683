"""Reference solutions, plots and exercise checks for Transformers from Scratch.

Every notebook imports from here, so a later cell never depends on an exercise the student has
not finished yet. Instructor and maintenance tools (the grader, the student-notebook generator)
live apart, in the ``course_tools`` package.
"""

# The language of the messages of helpers (checks, plots, training): set_language("es") for Spanish
from .i18n import number, scientific, set_language

# Notebook 01: positional encoding
from .positional import PositionalEncoding, apply_rope, frequencies, positional_encoding, rotation_matrix

# Notebooks 02-04: attention matrices, multi-head attention, masking
from .attention import masked_softmax, scaled_dot_product_attention, softmax
from .masking import (causal_mask, causal_mask_torch, decoder_mask, padding_mask, to_additive_mask,
                      to_nn_multihead_mask)
from .multi_head import (MultiHeadAttention, combine_heads, multi_head_attention, numpy_weights, split_heads,
                         to_nn_multihead_attention)

# Notebook 05: the full Transformer; notebook 06: trained on the date task
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerNorm, PositionwiseFeedForward
from .transformer import (PAPER_TABLE3, PAPER_VOCAB_SIZE, Transformer, attention_maps, count_parameters,
                          parameter_breakdown)
from .torch_copies import nn_transformer_logits, to_nn_transformer, to_torch_decoder_layer, to_torch_encoder_layer
from .dates import (FORMAT_NAMES, SOURCE_VOCAB, TARGET_VOCAB, DateDataset, decode_targets, encode_sources,
                    encode_targets, format_date, format_of, make_date_dataset)
from .schedule import scheduled_lr, transformer_lr
from .loss import LabelSmoothingLoss, loss_floor
from .training import Recipe, TrainConfig, default_device, train_step
from .decoding import beam_search, exact_match, greedy_decode, percent, predict
from .checkpoints import train_or_load
from .student_code import your_attention_and_encoding, your_recipe, yours_or_reference

# Pictures, and the check of every exercise (check_<exercise name>)
from .plots import (plot_attention, plot_cross_attention, plot_dimensions, plot_encoding, plot_heads, plot_history,
                    plot_mask, plot_schedule)
from .checks import (check_apply_rope, check_causal_mask, check_combine_heads, check_create_position_matrix,
                     check_decoder_layer, check_encoder_layer, check_feed_forward, check_gpt_block,
                     check_greedy_decode, check_label_smoothing_loss, check_layer_norm, check_masked_softmax,
                     check_multi_head_attention, check_multi_head_attention_module, check_padding_mask,
                     check_rotation_matrix, check_sample_next, check_scaled_dot_product_attention, check_softmax,
                     check_split_heads, check_temperature_probs, check_top_k_filter, check_top_p_filter,
                     check_train_step, check_transformer, check_transformer_lr)

__version__ = "0.2.0"
