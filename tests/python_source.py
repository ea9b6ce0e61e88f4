"""Read a Python file's top-level definitions as text: for the tests that keep deliberate copies identical."""

from __future__ import annotations

import ast
import difflib
import functools

from harness.model.paths import REPO_ROOT


@functools.lru_cache(maxsize=256)
def parsed(text: str) -> tuple[ast.Module, tuple[str, ...]]:
    """A file's tree and its lines, made once per text: the copy tests ask for the same fifty files hundreds of times."""
    return ast.parse(text), tuple(text.splitlines(keepends=True))


def segment(lines: tuple[str, ...], node: ast.stmt) -> str:
    """The node's exact source, as ast.get_source_segment gives it, without splitting the whole file again each time."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first].encode()[node.col_offset:node.end_col_offset].decode()
    head = lines[first].encode()[node.col_offset:].decode()
    tail = lines[last].encode()[:node.end_col_offset].decode()
    return head + "".join(lines[first + 1:last]) + tail


def top_level_names(tree: ast.Module | None, text: str, span: tuple[int, int] | None = None) -> dict[str, str]:
    """Top-level functions, classes and constants (inside `span` if given): name -> source. `tree` may be None
    (the text is parsed, once per distinct text)."""
    cached_tree, lines = parsed(text)
    tree = tree or cached_tree
    named: dict[str, str] = {}
    for node in tree.body:
        if span and not (span[0] <= node.lineno and node.end_lineno <= span[1]):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            named[node.name] = segment(lines, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            named[node.targets[0].id] = segment(lines, node)
    return named


def code_lines(text: str) -> list[str]:
    """The file's lines after its module docstring (each file's docstring names itself: its Run line, its library)."""
    docstring = ast.parse(text).body[0]
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant), "no module docstring"
    return text.splitlines()[docstring.end_lineno:]


def differing_lines(base: str, variant: str, code_only: bool = False) -> list[str]:
    """The lines that differ between two files, as diff shows them ('+ ...' added, '- ...' removed).

    `code_only`: compare what follows the module docstrings.
    """
    texts = [(REPO_ROOT / name).read_text(encoding="utf-8") for name in (base, variant)]
    base_lines, variant_lines = (code_lines(text) if code_only else text.splitlines() for text in texts)
    return [line for line in difflib.ndiff(base_lines, variant_lines) if line[:2] in ("+ ", "- ")]
