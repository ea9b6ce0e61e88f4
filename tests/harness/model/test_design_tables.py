"""A catalogue's `[[design]]` tables are read by the one checker (model/typed.py, issue 30 item 3): every key a design
may hold is a field of `Design`, so a misspelt or unknown key is refused, naming the file, the design, the key and the
nearest known key, and bench.py exits 2; scripts/catalogue/README.md lists exactly those keys.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import bench
import pytest
from harness.model.catalogue import Design, load_catalogue
from harness.model.paths import REPO_ROOT
from scenario_settings import DESIGN_TABLE



def catalogue_with(directory: Path, line: str) -> Path:
    """A one-design catalogue whose only fault is the line `key = value` set in its design table."""
    key = line.split("=")[0].strip()
    lines = DESIGN_TABLE.splitlines()
    kept = [own for own in lines if not own.startswith(f"{key} =")] if key else lines
    path = directory / "catalogue.toml"
    path.write_text("\n".join([*kept, line]) + "\n", encoding="utf-8")
    return path


def test_the_unchanged_design_table_loads_with_its_defaults(tmp_path: Path) -> None:
    catalogue_with(tmp_path, "")
    design = load_catalogue(tmp_path).design("sequential-sockets")
    assert (design.keep_alive, design.stop_signals, design.finishes_in_flight) == (False, ["SIGTERM", "SIGINT"], True)


def test_a_misspelt_key_is_refused_naming_the_file_the_design_and_the_nearest_key(tmp_path: Path) -> None:
    path = catalogue_with(tmp_path, "keep_alve = true")
    with pytest.raises(ValueError) as refused:
        load_catalogue(tmp_path)
    message = str(refused.value)
    assert str(path) in message and "'sequential-sockets'" in message
    assert "unknown key `keep_alve`" in message and "did you mean `keep_alive`" in message


@pytest.mark.parametrize(("line", "words"), [
    ('kind = "htp"', '"http" or "naive-http" or "echo" or "stream"'),
    ('stop_signals = ["SIGTREM"]', "non-empty list of signal names"),
    ('keep_alive = "yes"', "boolean"),
], ids=["kind", "stop-signal", "keep-alive"])
def test_a_value_of_the_wrong_type_is_refused_saying_what_was_expected(tmp_path: Path, line: str, words: str) -> None:
    catalogue_with(tmp_path, line)
    with pytest.raises(ValueError, match=re.escape(f"expected {words}")):
        load_catalogue(tmp_path)


def test_a_missing_key_is_refused_by_name(tmp_path: Path) -> None:
    """Before the checker, a design without `page` stopped the loader with a TypeError: bench.py's "bug" exit 3."""
    (tmp_path / "catalogue.toml").write_text(DESIGN_TABLE.replace('page = "designs/sequential-sockets.md"\n', ""),
                                             encoding="utf-8")
    with pytest.raises(ValueError, match="'sequential-sockets': missing key `page`"):
        load_catalogue(tmp_path)


def test_bench_exits_2_on_a_misspelt_design_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalogue_with(tmp_path, "keep_alve = true")
    assert bench.main(["--catalogue", str(tmp_path), "list"]) == bench.EXIT_BAD_INPUT == 2
    assert "did you mean `keep_alive`" in capsys.readouterr().err


def test_the_catalogue_readme_lists_exactly_the_design_keys() -> None:
    readme = (REPO_ROOT / "scripts" / "catalogue" / "README.md").read_text(encoding="utf-8")
    table = readme.split("## `[[design]]`", 1)[1].split("\n\n")[1]  # the section's first paragraph: its key table
    listed = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, re.MULTILINE))
    keys = {key for pair in listed for key in pair if key}
    assert keys == {field.name for field in dataclasses.fields(Design)}
