"""Exercise checks: one function per exercise, each printing one line and returning True/False.

EXERCISES lists, per notebook, the exercises its check cells report (the grader uses it to
notice a check cell that never ran).
"""

from .core import exercise_check, report
from .positional import check_create_position_matrix, check_rotation_matrix

EXERCISES = {
    "01_positional_encoding": ["create_position_matrix", "rotation_matrix"],
}
