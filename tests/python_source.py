"""Read a Python file's top-level definitions as text: for the tests that keep deliberate copies identical."""

from __future__ import annotations

import ast


def top_level_names(tree: ast.Module, text: str, span: tuple[int, int] | None = None) -> dict[str, str]:
    """Top-level functions, classes and constants (inside `span` if given): name -> source."""
    named: dict[str, str] = {}
    for node in tree.body:
        if span and not (span[0] <= node.lineno and node.end_lineno <= span[1]):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            named[node.name] = ast.get_source_segment(text, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            named[node.targets[0].id] = ast.get_source_segment(text, node)
    return named
