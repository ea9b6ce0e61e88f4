"""servers/README.md: every file in servers/ once, in the order of mkdocs.yml's nav, and never stale."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.render import site
from harness.render.servers_index import GENERATED_LINE, nav_pages, server_files, servers_index

INDEX = REPO_ROOT / "servers" / "README.md"
MKDOCS_YML = REPO_ROOT / "mkdocs.yml"
FILE_LINK = re.compile(r"\[`([^`]+)`\]\(([^)]+)\)")
PAGE_LINK = re.compile(r"\]\(\.\./docs/([^)]+)\)")


class NavLoader(yaml.SafeLoader):
    """YAML without running code: mkdocs.yml's `!!python/name:` tags load as None (the nav has none)."""


NavLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def yaml_nav_pages() -> list[tuple[tuple[str, ...], str]]:
    """(sections, page) for every page of the nav, read by a full YAML parser."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(items: list, sections: tuple[str, ...]) -> None:
        for item in items:
            if isinstance(item, str):
                found.append((sections, item))
                continue
            (title, value), = item.items()
            if isinstance(value, list):
                walk(value, sections + (title,))
            else:
                found.append((sections, value))

    walk(yaml.load(MKDOCS_YML.read_text(encoding="utf-8"), Loader=NavLoader)["nav"], ())
    return found


def test_the_committed_index_is_what_render_writes() -> None:
    assert INDEX.read_text(encoding="utf-8") == servers_index(), "run `python scripts/bench.py render`"
    assert INDEX.read_text(encoding="utf-8").splitlines()[0] == GENERATED_LINE
    assert "`python scripts/bench.py render`" in GENERATED_LINE


def test_every_file_in_servers_appears_exactly_once() -> None:
    links = FILE_LINK.findall(INDEX.read_text(encoding="utf-8"))
    assert all(text == target for text, target in links)
    names = [text for text, _ in links]
    assert sorted(names) == server_files() == sorted(set(names))
    assert server_files() == sorted(path.name for path in (REPO_ROOT / "servers").iterdir()
                                    if path.is_file() and path.name != "README.md" and not path.name.startswith("."))


def test_the_nav_reader_agrees_with_a_yaml_parser() -> None:
    assert [(page.sections, page.page) for page in nav_pages(MKDOCS_YML.read_text(encoding="utf-8"))] == \
        yaml_nav_pages()


def test_design_pages_come_in_nav_order_and_every_design_page_is_there() -> None:
    """Each row's first page (where the site first reaches the file) never goes back up the nav."""
    position = {page: index for index, (_, page) in enumerate(yaml_nav_pages())}
    designs_part, _, _ = INDEX.read_text(encoding="utf-8").partition("## Configs and other files")
    first_pages = [PAGE_LINK.search(line)[1] for line in designs_part.splitlines() if line.startswith("| [`")]
    assert len(first_pages) > 30
    assert [position[page] for page in first_pages] == sorted(position[page] for page in first_pages)
    assert {design.page for design in load_catalogue().designs.values()} == set(PAGE_LINK.findall(designs_part))


def test_a_file_no_design_runs_is_described_by_its_own_header(tmp_path: Path) -> None:
    servers, docs = tmp_path / "servers", tmp_path / "docs"
    servers.mkdir()
    docs.mkdir()
    (servers / "sequential_sockets.py").write_text('"""Raw sockets."""\n')
    (servers / "stray_app.py").write_text('"""A stray app: not in the catalogue.\n\nMore.\n"""\n')
    (servers / "proxy.conf").write_text("# A proxy in front\n# of a design.\n#\n# Details.\nevents {}\n")
    (docs / "page.md").write_text("Run servers/proxy.conf, not servers/proxy.conf.bak or my_stray_app.py.\n")
    index = servers_index(servers_dir=servers, docs_dir=docs)
    assert "| [`sequential_sockets.py`](sequential_sockets.py) | Raw sockets, one client at a time |" in index
    assert "| [`proxy.conf`](proxy.conf) | A proxy in front of a design. | [page.md](../docs/page.md) |" in index
    assert "| [`stray_app.py`](stray_app.py) | A stray app: not in the catalogue. | – |" in index


def test_render_check_catches_a_hand_edit(tmp_path: Path) -> None:
    content = servers_index()
    readme = tmp_path / "README.md"
    readme.write_text(content.replace("| Raw sockets, one client at a time |", "| Raw sockets |"), encoding="utf-8")
    assert site.differences({readme: content}, {readme}) == [f"stale: {readme}"]
    readme.write_text(content, encoding="utf-8")
    assert site.differences({readme: content}, {readme}) == []
    assert site.differences({readme: content}, set()) == [f"missing: {readme}"]


def test_render_check_and_write_cover_the_index_only_for_the_real_site(tmp_path: Path) -> None:
    assert set(site.extra_files()) == {INDEX}
    assert site.extra_files(tmp_path / "generated") == {}
