"""The training text of notebook 07's language model: Python source code from the student's own Python.

Every Python installation holds the source of its standard library (``sysconfig.get_paths()["stdlib"]``,
e.g. /usr/lib/python3.11 or C:\\Python311\\Lib), under the Python Software Foundation License that comes
with it: nothing is downloaded or shipped with the course. The text is the files of STDLIB_FILES, a fixed
list of pure-Python modules present in every Python from 3.9 to 3.13, read in that (sorted) order and
joined with one empty line between them. Another Python version has other versions of these files, so
the text (and the trained model) differs a little from one Python to another; the cache key of the
trained model includes the text's SHA-256.

Tokens are characters: the newline and the 95 printable ASCII characters; anything else (a tab, an
accented letter in a comment) becomes <unk>.

    stdlib_folder()            where this Python keeps its standard library
    read_stdlib_text()         StdlibText: the text, the files it was read from, their sizes, its SHA-256
    TEXT_VOCAB                 the 98 tokens: <pad>, <unk>, the newline and the printable ASCII characters
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from .dates import PAD, UNK, Vocabulary

STDLIB_FILES = ("abc.py", "bisect.py", "calendar.py", "colorsys.py", "contextlib.py", "copy.py", "csv.py",
                "dataclasses.py", "difflib.py", "fnmatch.py", "fractions.py", "functools.py", "glob.py", "heapq.py",
                "keyword.py", "linecache.py", "numbers.py", "operator.py", "pprint.py", "queue.py", "random.py",
                "reprlib.py", "sched.py", "secrets.py", "shlex.py", "statistics.py", "string.py", "textwrap.py",
                "timeit.py")
TEXT_CHARS = "\n" + "".join(chr(i) for i in range(32, 127))
TEXT_VOCAB = Vocabulary(TEXT_CHARS, [PAD, UNK])


def stdlib_folder() -> Path:
    """The folder of this Python's standard library (its .py files)."""
    return Path(sysconfig.get_paths()["stdlib"])


@dataclass(frozen=True)
class StdlibText:
    text: str
    folder: Path
    sizes: tuple[tuple[str, int], ...]  # (file name, characters), in reading order

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def ids(self) -> torch.Tensor:
        """The whole text as token ids (N,)."""
        return torch.tensor(TEXT_VOCAB.encode(self.text), dtype=torch.long)

    def split(self, valid_fraction: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
        """(train ids, validation ids): the last valid_fraction of the text is held out."""
        ids = self.ids()
        cut = int(len(ids) * (1 - valid_fraction))
        return ids[:cut], ids[cut:]


def read_stdlib_text(files: tuple[str, ...] = STDLIB_FILES, folder: Path | None = None) -> StdlibText:
    """The files of the standard library, in the given order, joined by an empty line (UTF-8; newlines as \\n)."""
    folder = Path(folder) if folder else stdlib_folder()
    pieces, sizes = [], []
    for name in files:
        path = folder / name
        if not path.exists():
            raise FileNotFoundError(f"{path} is not in this Python's standard library ({folder})")
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        pieces.append(text)
        sizes.append((name, len(text)))
    return StdlibText("\n\n".join(pieces), folder, tuple(sizes))


__all__ = ["STDLIB_FILES", "TEXT_CHARS", "TEXT_VOCAB", "StdlibText", "read_stdlib_text", "stdlib_folder"]
