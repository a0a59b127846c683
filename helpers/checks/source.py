"""The answer's own source, read as a notebook's kernel holds it (linecache): its functions, their syntax
nodes, and whether it still holds the stub of its exercise cell."""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
from typing import Any


def target_of(answer: Any) -> Any:
    """The function or class behind an answer (a bound method: its function; an instance: its class)."""
    target = getattr(answer, "__func__", answer)
    return target if inspect.isfunction(target) or inspect.isclass(target) else type(target)


def functions_of(cls: type) -> list[Any]:
    """The plain functions a class defines itself (methods, static and class methods, property accessors)."""
    found = []
    for value in vars(cls).values():
        value = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(value, property):
            found += [f for f in (value.fget, value.fset, value.fdel) if inspect.isfunction(f)]
        elif inspect.isfunction(value):
            found.append(value)
    return found


def answer_functions(answer: Any) -> list[Any]:
    """The functions the student wrote for an answer: the function itself, or the methods of the class."""
    target = target_of(answer)
    return [target] if inspect.isfunction(target) else functions_of(target) if inspect.isclass(target) else []


def answer_files(answer: Any) -> set[str]:
    """The files (notebook cells, in a kernel) that hold the code of the answer's functions."""
    return {function.__code__.co_filename for function in answer_functions(answer)}


def source_tree(filename: str) -> ast.Module | None:
    """The syntax tree of a file (a notebook cell, through linecache), or None when it cannot be read."""
    return _parsed("".join(linecache.getlines(filename)))


@functools.cache
def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text) if text else None
    except (SyntaxError, ValueError):
        return None


def function_nodes(function: Any) -> list[ast.AST]:
    """The syntax nodes of a function (a def or a lambda starting on its first line), read from its file."""
    code = function.__code__
    tree = source_tree(code.co_filename)
    found = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            lines = {node.lineno} | {d.lineno for d in node.decorator_list}
        elif isinstance(node, ast.Lambda) and code.co_name == "<lambda>":
            lines = {node.lineno}
        else:
            continue
        if code.co_firstlineno in lines:
            found.append(node)
    return found


def is_stub(answer: Any) -> bool:
    """Whether the answer still holds its stub: its function, or a method of its class, has a statement
    `raise NotImplementedError(...)` in its own body (as the exercise cell gives it, after `# Your Code Here`)."""
    for function in answer_functions(answer):
        for node in function_nodes(function):
            for statement in [] if isinstance(node, ast.Lambda) else node.body:
                raised = statement.exc if isinstance(statement, ast.Raise) else None
                raised = raised.func if isinstance(raised, ast.Call) else raised
                if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
                    return True
    return False
