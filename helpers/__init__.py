"""Reference solutions, plots and exercise checks for Transformers from Scratch.

Every notebook imports from here, so a later cell never depends on an exercise the student has
not finished yet.
"""

# Notebook 01: positional encoding
from .positional import PositionalEncoding, frequencies, positional_encoding, rotation_matrix
from .checks import check_create_position_matrix, check_rotation_matrix

__version__ = "0.1.0"
