"""How fast can Python go: the chain of optimisation steps, each a runnable server.

Theory of operation: the fastest design, servers/uvloop_protocol_keep_alive.py,
is the last of a chain of steps. Each step is a unified diff in
scripts/how_fast/ (NN-name.patch, in order); step k's server is the design
with the diffs after k taken back out, so every step stays runnable and
measurable, and the page shows each diff. apply_patch is exact (no fuzz): a
diff that no longer fits the design fails loudly, and tests check the whole
chain. The suite (suites/how_fast.py, `bench.py how-fast`) measures the steps and
writes the records named here; render/how_fast_tables.py reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.model.paths import REPO_ROOT

STEPS_DIR = REPO_ROOT / "scripts" / "how_fast"
DESIGN_FILE = REPO_ROOT / "servers" / "uvloop_protocol_keep_alive.py"
STEPS_RECORD = Path("how-fast") / "steps.json"  # under results/; a subdirectory, so it is not read as a scenario
PROFILE_NAME = "uvloop-protocol-keep-alive"
PROFILES_DIR = Path("profiles")  # under results/
HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A step's diff does not fit the text it is applied to."""


@dataclass(frozen=True)
class Step:
    number: int  # 0 is the first version, before any diff
    name: str  # the diff's file name without NN- and .patch ("first-version" for step 0)
    patch: Path | None


def steps(steps_dir: Path = STEPS_DIR) -> list[Step]:
    """Step 0 (the first version) and one step per diff, in order."""
    patches = sorted(steps_dir.glob("[0-9][0-9]-*.patch"))
    return [Step(0, "first-version", None)] + [
        Step(index, path.stem.split("-", 1)[1], path) for index, path in enumerate(patches, start=1)]


def apply_patch(text: str, patch: str, reverse: bool = False) -> str:
    """Apply a unified diff to text exactly (reverse=True takes it back out); PatchError if it does not fit."""
    lines = text.splitlines(keepends=True)
    result: list[str] = []
    position = 0  # index in `lines` of the next line not yet copied
    patch_lines = patch.splitlines(keepends=True)
    index = 0
    while index < len(patch_lines):
        match = HUNK.match(patch_lines[index])
        index += 1
        if not match:
            continue  # the ---/+++ header
        old_start = int(match.group(3 if reverse else 1))
        old, new = [], []
        while index < len(patch_lines) and not patch_lines[index].startswith("@@"):
            line = patch_lines[index]
            index += 1
            kind, body = line[:1], line[1:]
            if kind == "\\":
                continue  # "\ No newline at end of file"
            if kind == " ":
                old.append(body)
                new.append(body)
            elif kind == ("+" if reverse else "-"):
                old.append(body)
            elif kind == ("-" if reverse else "+"):
                new.append(body)
        start = max(old_start - 1, 0) if old else old_start
        if lines[start:start + len(old)] != old or start < position:
            raise PatchError(f"hunk at line {old_start} does not match")
        result += lines[position:start] + new
        position = start + len(old)
    return "".join(result + lines[position:])


def step_source(step: Step, design_text: str | None = None, all_steps: list[Step] | None = None) -> str:
    """The server file of a step: the design with every later step's diff taken back out, last first."""
    text = DESIGN_FILE.read_text(encoding="utf-8") if design_text is None else design_text
    for later in reversed([other for other in (all_steps or steps()) if other.number > step.number]):
        assert later.patch is not None
        text = apply_patch(text, later.patch.read_text(encoding="utf-8"), reverse=True)
    return text


# Rendering -----------------------------------------------------------------------------------------

