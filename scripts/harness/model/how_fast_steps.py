"""Chains of optimisation steps, each step a runnable server: how fast can Python go, and fast and correct.

Theory of operation: a design is the last of a chain of steps. Each step is a
unified diff in the chain's folder (NN-name.patch, in order); step k's server is
the design with the diffs after k taken back out, so every step stays runnable
and measurable, and the page shows each diff. apply_patch is exact (no fuzz): a
diff that no longer fits the design fails loudly, and tests check every chain.
A chain is a value (Chain): its final design file, its diff folder, its record
and the catalogue entry its steps are started as. HOW_FAST leads from the asyncio
keep-alive design to servers/uvloop_protocol_keep_alive.py (docs/how-fast.md);
FAST_AND_CORRECT from servers/hardened_event_loop.py, which is its step 0, to
servers/fast_and_correct.py (docs/designs/fast-and-correct.md). The suite
(suites/how_fast.py, `bench.py how-fast steps [--chain NAME]`) measures a chain's
steps and writes its record; render/how_fast_tables.py reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.model.paths import REPO_ROOT

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Chain:
    """A design and the diffs that lead to it, one step each."""

    name: str  # the command line's --chain, and the generated table's name (<name>-steps.md)
    design_file: Path  # the final design: the last step
    steps_dir: Path  # the diffs, NN-name.patch
    record: Path  # under results/; a subdirectory, so it is not read as a scenario
    design_name: str  # the catalogue entry every step is started as (its command line, its stop signal)
    first_step_name: str  # step 0's name

    def steps(self) -> list[Step]:
        """Step 0 and one step per diff, in order."""
        patches = sorted(self.steps_dir.glob("[0-9][0-9]-*.patch"))
        return [Step(0, self.first_step_name, None)] + [
            Step(index, path.stem.split("-", 1)[1], path) for index, path in enumerate(patches, start=1)]

    def record_for(self, request_heads: str | None = None) -> Path:
        """The record of a run with these request heads (None: wrk's one-header GET; "production": the heads of
        clients/tools/production_heads.txt, each unique), under results/."""
        return self.record if request_heads is None else self.record.with_name(
            f"{self.record.stem}-{request_heads}-heads{self.record.suffix}")

    def step_source(self, step: Step, design_text: str | None = None, all_steps: list[Step] | None = None) -> str:
        """The server file of a step: the design with every later step's diff taken back out, last first."""
        text = self.design_file.read_text(encoding="utf-8") if design_text is None else design_text
        for later in reversed([other for other in (all_steps or self.steps()) if other.number > step.number]):
            assert later.patch is not None
            try:
                text = apply_patch(text, later.patch.read_text(encoding="utf-8"), reverse=True)
            except PatchError as error:
                raise PatchError(f"{later.patch.relative_to(REPO_ROOT)}: {error}") from None
        return text


HOW_FAST = Chain("how-fast", REPO_ROOT / "servers" / "uvloop_protocol_keep_alive.py", REPO_ROOT / "scripts" / "how_fast",
                 Path("how-fast") / "steps.json", "uvloop-protocol-keep-alive", "first-version")
FAST_AND_CORRECT = Chain("fast-and-correct", REPO_ROOT / "servers" / "fast_and_correct.py",
                         REPO_ROOT / "scripts" / "fast_and_correct", Path("fast-and-correct") / "steps.json",
                         "fast-and-correct", "the-hardened-design")
CHAINS = {chain.name: chain for chain in (HOW_FAST, FAST_AND_CORRECT)}

# The profile (`bench.py how-fast profile`) samples the how-fast chain's last step.
PROFILE_NAME = HOW_FAST.design_name
PROFILES_DIR = Path("profiles")  # under results/


class PatchError(ValueError):
    """A step's diff does not fit the text it is applied to."""


@dataclass(frozen=True)
class Step:
    number: int  # 0 is the first version, before any diff
    name: str  # the diff's file name without NN- and .patch (the chain's first_step_name for step 0)
    patch: Path | None


def apply_patch(text: str, patch: str, reverse: bool = False) -> str:
    """Apply a unified diff to text exactly (reverse=True takes it back out); PatchError if it does not fit.

    Refused too: a diff with no hunk, a line that is no diff line, and a hunk whose line counts differ from
    its header's (a truncated or hand-edited diff), so a broken step never passes as an empty one.
    """
    lines = text.splitlines(keepends=True)
    result: list[str] = []
    position = 0  # index in `lines` of the next line not yet copied
    patch_lines = patch.splitlines(keepends=True)
    index = 0
    hunks = 0
    while index < len(patch_lines):
        match = HUNK.match(patch_lines[index])
        index += 1
        if not match:
            continue  # the ---/+++ header
        hunks += 1
        old_start = int(match.group(3 if reverse else 1))
        old_count, new_count = (int(match.group(group) or 1) for group in ((4, 2) if reverse else (2, 4)))
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
            else:
                raise PatchError(f"hunk at line {old_start}: {line!r} is not a diff line")
        if (len(old), len(new)) != (old_count, new_count):
            raise PatchError(f"hunk at line {old_start} has {len(old)} and {len(new)} lines, "
                             f"its header says {old_count} and {new_count}")
        start = max(old_start - 1, 0) if old else old_start
        if lines[start:start + len(old)] != old or start < position:
            raise PatchError(f"hunk at line {old_start} does not match")
        result += lines[position:start] + new
        position = start + len(old)
    if not hunks:
        raise PatchError("no hunk: not a unified diff")
    return "".join(result + lines[position:])
