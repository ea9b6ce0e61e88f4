"""A new design, grown from one of ours: the files `bench.py new-design NAME --grows-from OTHER` writes.

A design is a server file, a catalogue entry, a page and a nav entry (README.md, "Adding a design").
`plan` reads the repository and returns every file's new text, or refuses (NewDesignError) having
written nothing; `write` then writes them, each atomically. The new server file is OTHER's file
with its docstring's first paragraph and its "Grows from:" line naming the new design, so
`diff servers/other.py servers/new.py` shows only what the reader changes next, and it runs as
is. The generated files (servers/README.md, docs/_generated/designs/NAME.md) are the renderer's:
bench.py renders them after `write`.

Known limits: the catalogue entry and the nav line are inserted as text after OTHER's (the files
keep their comments), so OTHER's entry must be a `[[design]]` table of plain keys, as every entry
is, and OTHER's page must appear once in mkdocs.yml's nav.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.model.catalogue import DEFAULT_COMMAND, Catalogue, Design
from harness.model.paths import REPO_ROOT

NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")  # the catalogue's names: lower case, hyphens
FIRST_KEYS = ("name", "title", "kind", "file", "page", "model", "concurrent", "reproduces")
GROWS_FROM_LINE = re.compile(r"^Grows from:.*?(?=\n\n|\Z)", re.M | re.S)  # to the end of its paragraph
HEADER_LINE = re.compile(r"^\[")  # a TOML table header: the end of the entry above it
SKIPPED_BLOCK = '<!--pytest.mark.skip(reason="included file: tested by tests/servers/test_behaviour.py")-->'


class NewDesignError(ValueError):
    """The command's input cannot make a design: the message says why; nothing was written."""


@dataclass(frozen=True)
class NewDesign:
    """A design to add: its names, the design it grows from, and every file's new text."""

    name: str
    other: Design
    server_file: str  # relative to the repository, like the catalogue's `file`
    page: str  # relative to docs/, like the catalogue's `page`
    files: dict[Path, str]  # every file the plan writes -> its whole new text


def file_stem(name: str) -> str:
    return name.replace("-", "_")


def our_python_server(design: Design) -> bool:
    """A design whose file is one of our own servers, started as `{python} {file}` (not a real server's config)."""
    return (design.file.startswith("servers/") and design.file.endswith(".py") and "/" not in design.file[8:]
            and design.command[:2] == DEFAULT_COMMAND[:2])


def plan(catalogue: Catalogue, name: str, grows_from: str, title: str | None = None, model: str | None = None,
         root: Path = REPO_ROOT, catalogue_dir: Path | None = None) -> NewDesign:
    """Every file a new design NAME grown from GROWS_FROM writes, or NewDesignError naming what is wrong."""
    catalogue_dir = catalogue_dir or root / "scripts" / "catalogue"
    if not NAME.match(name):
        raise NewDesignError(f"{name!r} is not a design name: lower-case letters, digits and single hyphens "
                             "(thread-pool-queue)")
    if name in catalogue.designs:
        raise NewDesignError(f"design {name!r} exists already ({catalogue.designs[name].file}); choose another name")
    if grows_from not in catalogue.designs:
        close = difflib.get_close_matches(grows_from, list(catalogue.designs), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; `bench.py list` names them"
        raise NewDesignError(f"unknown design {grows_from!r} to grow from{hint}")
    other = catalogue.designs[grows_from]
    if not our_python_server(other):
        raise NewDesignError(f"{grows_from} runs {other.file} with `{' '.join(other.command)}`: a new design grows "
                             "from one of our own Python servers in servers/ (started as `{python} {file}`)")
    server_file, page = f"servers/{file_stem(name)}.py", f"designs/{name}.md"
    targets = [root / server_file, root / "docs" / page, root / "docs" / "_generated" / "designs" / f"{name}.md"]
    existing = [str(path.relative_to(root)) for path in targets if path.exists()]
    if existing:
        raise NewDesignError(f"{', '.join(existing)} exist(s) already: remove or choose another name")
    title = title or name.replace("-", " ").capitalize()
    model = model or other.model
    catalogue_file = catalogue_file_of(catalogue_dir, grows_from)
    mkdocs = root / "mkdocs.yml"
    files = {
        root / server_file: server_text((root / other.file).read_text(encoding="utf-8"), other, name, title,
                                        server_file),
        catalogue_file: catalogue_text(catalogue_file.read_text(encoding="utf-8"), other, name, title, model,
                                       server_file, page),
        root / "docs" / page: page_text(other, name, title, server_file, page),
        mkdocs: nav_text(mkdocs.read_text(encoding="utf-8"), other, title, page),
    }
    return NewDesign(name=name, other=other, server_file=server_file, page=page, files=files)


def write(design: NewDesign) -> list[Path]:
    """Write the plan's files, each atomically (a temporary file renamed over it); return their paths."""
    for path, text in design.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                         prefix=f".{path.name}.") as handle:
            handle.write(text)
        if path.exists():
            os.chmod(handle.name, path.stat().st_mode & 0o777)
        else:
            os.chmod(handle.name, 0o644)
        os.replace(handle.name, path)
    return list(design.files)


# --- the server file --------------------------------------------------------------------------------------------


def server_text(text: str, other: Design, name: str, title: str, server_file: str) -> str:
    """OTHER's file, its docstring's first paragraph and "Grows from:" paragraph end naming the new design."""
    tree = ast.parse(text)
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
            and text.startswith('"""')):
        raise NewDesignError(f"{other.file} does not open with a docstring to rename")
    lines = text.splitlines(keepends=True)
    end = sum(len(line) for line in lines[:first.end_lineno])  # the docstring ends on this line
    docstring, rest = text[3:end], text[end:]
    other_stem = Path(other.file).name
    paragraphs = docstring.split("\n\n", 1)
    if len(paragraphs) == 1:
        raise NewDesignError(f"{other.file}'s docstring is one paragraph: nothing to keep after the new first one")
    opening = f"{title} (the design {name}): it grows from {other_stem}."
    grows = (f"Grows from: {other_stem} (so far the same file: the model section is where\n"
             f"the two will differ).")
    body = paragraphs[1] if len(paragraphs) > 1 else ""
    body, found = GROWS_FROM_LINE.subn(lambda _: grows, body, count=1)
    if not found:
        body = grows + "\n\n" + body
    body = body.replace(other.file, server_file)  # "Run: python servers/other.py" runs the new file
    return '"""' + opening + "\n\n" + body + rest


# --- the catalogue entry ----------------------------------------------------------------------------------------


def catalogue_file_of(catalogue_dir: Path, name: str) -> Path:
    """The catalogue file that holds the design NAME's entry."""
    for path in sorted(catalogue_dir.glob("*.toml")):
        with path.open("rb") as handle:
            if any(entry.get("name") == name for entry in tomllib.load(handle).get("design", [])):
                return path
    raise NewDesignError(f"no file in {catalogue_dir} holds the [[design]] entry of {name}")


def toml_value(value: Any) -> str:
    """A TOML value as the catalogue writes it: strings, booleans, numbers, lists and inline tables of them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(key)} = {toml_value(item)}" for key, item in value.items()) + " }"
    raise NewDesignError(f"cannot write the catalogue value {value!r}")


def entry_lines(entry: dict[str, Any]) -> list[str]:
    keys = [key for key in FIRST_KEYS if key in entry] + [key for key in entry if key not in FIRST_KEYS]
    return ["[[design]]"] + [f"{key} = {toml_value(entry[key])}" for key in keys]


def catalogue_text(text: str, other: Design, name: str, title: str, model: str, server_file: str, page: str) -> str:
    """The catalogue file with the new entry right after OTHER's: OTHER's keys, the new names, nothing reproduced."""
    entries = [entry for entry in tomllib.loads(text).get("design", []) if entry.get("name") == other.name]
    entry = dict(entries[0])
    entry.update(name=name, title=title, file=server_file, page=page, model=model, reproduces=[])
    lines = text.splitlines()
    own_name = re.compile(rf'^name\s*=\s*"{re.escape(other.name)}"\s*(#.*)?$')
    start = next(index for index, line in enumerate(lines) if own_name.match(line)
                 and any(earlier.strip() == "[[design]]" for earlier in lines[max(index - 3, 0):index]))
    end = next((index for index in range(start + 1, len(lines)) if HEADER_LINE.match(lines[index])), len(lines))
    while end > start and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1  # blank lines and comments before the next header belong to what follows
    new_lines = lines[:end] + [""] + entry_lines(entry) + lines[end:]
    new_text = "\n".join(new_lines) + ("\n" if text.endswith("\n") else "")
    written = [found for found in tomllib.loads(new_text).get("design", []) if found.get("name") == name]
    if written != [entry]:  # the text insertion must read back as exactly the entry meant
        raise NewDesignError(f"could not insert {name}'s entry after {other.name}'s cleanly")
    return new_text


# --- the page and the nav ---------------------------------------------------------------------------------------


def page_text(other: Design, name: str, title: str, server_file: str, page: str) -> str:
    """A design page as the tests ask: the model first, the whole file folded, the results; no placeholder."""
    other_link = os.path.relpath(other.page, os.path.dirname(page))
    return f"""# {title}

This design starts as a copy of [{other.title}]({other_link}) (`{other.file}`);
the model section below is where it will differ.

## The model

{SKIPPED_BLOCK}
```python title="{server_file}: the model"
--8<-- "{server_file}:model"
```

??? example "The whole file: {server_file}"

    {SKIPPED_BLOCK}
    ```python title="{server_file}"
    --8<-- "{server_file}"
    ```

**Grows from:** [{other.title}]({other_link}). The `diff` shows what changed:

```bash
diff {other.file} {server_file} || true
```

Check it the way the benchmark does (this writes only under `build/`):

```bash
python scripts/bench.py check {name}
```

## Results

--8<-- "docs/_generated/designs/{name}.md"
"""


def nav_text(text: str, other: Design, title: str, page: str) -> str:
    """mkdocs.yml with the new page right after OTHER's, at its depth, titled if OTHER's entry is."""
    item = re.compile(rf"^(?P<indent> *)- (?:(?P<title>.+?):\s+)?['\"]?{re.escape(other.page)}['\"]?\s*(#.*)?$")
    lines = text.splitlines(keepends=True)
    found = [(index, match) for index, line in enumerate(lines) if (match := item.match(line.rstrip("\n")))]
    if len(found) != 1:
        raise NewDesignError(f"mkdocs.yml's nav names {other.page} {len(found)} times, not once: add the page by hand")
    index, match = found[0]
    shown = json.dumps(title) if re.search(r"[:#'\"\[\]{}&*!|>%@`]", title) else title
    line = f"{match['indent']}- {shown}: {page}\n" if match["title"] else f"{match['indent']}- {page}\n"
    return "".join(lines[:index + 1] + [line] + lines[index + 1:])
