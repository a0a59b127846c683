"""What the student's code may not call while its check runs (scaffold: enforcement to come).

Each exercise declares ``off_limits`` (harness.Exercise): dotted names of the course's own
reference for that exercise and of the built-ins the notebook names as off limits. ``call()`` in
harness.py runs every call of the student's code inside ``forbidden(exercise)``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def forbidden(exercise: Any) -> Iterator[None]:
    """While inside, the off-limits names of `exercise` (None: nothing) cannot be used."""
    yield
