"""Reading and writing notebooks and other files: the one place the course does it.

    read_json_notebook(path)     the notebook's JSON as a dict (UTF-8; a ValueError in one line if it is none)
    code_cells(notebook)         (index, source) of each code cell
    python_lines(source)         a cell's source without IPython's magics and shell escapes, line numbers kept
    normalized(source)           the code without comments, docstrings and layout: equal for equal code
    write_atomically(path, text) UTF-8 text written whole through a temporary file and a rename, or not at all
    cached_by_content(function)  function(path) computed again only when the file's bytes have changed

The grader, the student-notebook generator, the translation tool, the checkpoints and the loading of a
student's saved notebook all use these, so that a notebook means the same thing to each of them.
Reading uses json, not nbformat: importing nbformat costs about a second (its schema validator), and
reading a saved notebook's cells needs none of it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import os
import re
import stat
import tempfile
import textwrap
import tokenize
from pathlib import Path
from typing import Any, Callable

# A line magic, a cell magic or a shell escape, after any indentation: %matplotlib inline, %%time, !pip install.
# Not the modulo operator or != at the start of a continuation line: `    % (a, b))`, `    != 0)`.
MAGIC_LINE = re.compile(r"[ \t]*(%%?[A-Za-z_]|![^=])")


def read_json_notebook(path: str | Path) -> dict:
    """The notebook at path, as the JSON object it is; a ValueError of one line when it cannot be read
    (missing, unreadable, not UTF-8, not JSON) or is not a Jupyter notebook (format 4)."""
    path = Path(path)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"cannot read the notebook {path}: {error}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError(f"cannot read the notebook {path}: it is not a Jupyter notebook (format 4)")
    return notebook


def cell_source(cell: Any) -> str:
    """A cell's source as one string (nbformat stores it as a string or as a list of lines)."""
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    return "".join(source) if isinstance(source, list) else str(source)


def code_cells(notebook: dict) -> list[tuple[int, str]]:
    """(index among all cells, source) of each code cell of a notebook read by read_json_notebook or nbformat."""
    return [(index, cell_source(cell)) for index, cell in enumerate(notebook["cells"])
            if isinstance(cell, dict) and cell.get("cell_type") == "code"]


def python_lines(source: str) -> str:
    """A cell's source with each IPython magic or shell escape (a line that starts, after any indentation,
    with %name, %%name or !command) made blank, so that what is left parses as Python and keeps its line
    numbers. A continuation line that starts with the operator % or != is Python, and stays."""
    return "\n".join("" if MAGIC_LINE.match(line) else line for line in source.splitlines())


def normalized(source: str) -> str:
    """The code of source without its comments, docstrings, blank lines and runs of spaces: equal for equal
    code, on every Python version (it cuts by the positions ast and tokenize report; ast.unparse differs
    between 3.11 and 3.12). So the English and the Spanish notebook, whose code differs only in comments and
    docstrings, share one trained checkpoint, and editing a helper's prose retrains nothing."""
    source = textwrap.dedent(source)
    lines = source.splitlines()
    cuts = []  # (first line, first column, last line, end column), lines counted from 1, columns in characters
    try:
        for node in ast.walk(ast.parse(source)):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                doc = body[0]  # ast counts columns in UTF-8 bytes
                start = len(lines[doc.lineno - 1].encode()[:doc.col_offset].decode())
                end = len(lines[doc.end_lineno - 1].encode()[:doc.end_col_offset].decode())
                cuts.append((doc.lineno, start, doc.end_lineno, end))
        cuts += [(*token.start, *token.end) for token in tokenize.generate_tokens(io.StringIO(source).readline)
                 if token.type == tokenize.COMMENT]
    except (SyntaxError, tokenize.TokenError):
        return source
    for first, start, last, end in sorted(cuts, reverse=True):  # from the end, so earlier positions stay valid
        lines[first - 1:last] = [lines[first - 1][:start] + lines[last - 1][end:]]
    return "\n".join(line[:len(line) - len(line.lstrip())] + " ".join(line.split()) for line in lines if line.strip())


def write_atomically(path: str | Path, text: str | None = None, *, writer: Callable[[Path], None] | None = None,
                     newline: str | None = "") -> None:
    """Write path whole or not at all: to a temporary file beside it, then a rename (os.replace).

    text: UTF-8 text to write (written as it is: newline="" keeps its line endings on every system).
    writer: instead of text, a function that writes the temporary file at the Path it is given
    (torch.save, say). A reader, or a run interrupted half-way, sees the old file or the new one."""
    if (text is None) == (writer is None):
        raise TypeError("write_atomically needs text or writer, not both")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if writer is None:
            with os.fdopen(handle, "w", encoding="utf-8", newline=newline) as out:
                out.write(text)
        else:
            os.close(handle)
            writer(Path(temporary))
        os.chmod(temporary, file_mode(path))  # mkstemp makes it private (0600): give it what a plain write gives
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def file_mode(path: Path) -> int:
    """The permissions a written file gets: its own when it exists, else a new file's (0o666 less the umask)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)  # reading the umask means setting it: put it back at once
        os.umask(umask)
        return 0o666 & ~umask


def cached_by_content(function: Callable[[Path], Any]) -> Callable[[Path], Any]:
    """function(path), computed again only when the file's bytes have changed (tfs-translate's check and review
    read the same English files for every edition). A list answer is copied, so a caller may change its copy."""
    cache: dict[Path, tuple[bytes, Any]] = {}

    @functools.wraps(function)
    def cached(path: Path) -> Any:
        try:
            stamp = hashlib.blake2b(Path(path).read_bytes()).digest()
        except OSError:  # function says what is wrong with it
            return function(path)
        if path not in cache or cache[path][0] != stamp:
            cache[path] = (stamp, function(path))
        value = cache[path][1]
        return list(value) if isinstance(value, list) else value

    return cached


__all__ = ["cached_by_content", "cell_source", "code_cells", "file_mode", "normalized", "python_lines",
           "read_json_notebook", "write_atomically"]
