"""For every test, here because tests/conftest.py only reaches the items under tests/: the code-block
runner for README.md and docs/, and which tests share an xdist worker."""

import pytest

pytest_plugins = ["tests.codeblock_runs", "tests.tiers"]


# `make test` runs the suite on several workers (pytest-xdist, --dist loadgroup). Tests that share an
# expensive module fixture stay on one worker, so the fixture is made once: for each such file, the fixtures that
# cost (None: every test of the file, where the tests share more than a fixture: test_new_design's scratch copy,
# test_harness's quick runs into one build/). A test of that file that uses none of them goes to any worker: the
# stop-signal and concurrency tests of test_behaviour start servers of their own and were 160 s of its 205 s on one
# worker; the linkchecker, search and tooltip tests need the built site, not the browser's visit of every page.
# The two files that read the built site without a browser go together; the site is built once per run whichever
# worker asks first (tests/conftest.py's strict_build), and so is the whole render (`rendered`). The docs' code
# blocks run on two workers, each group in page order: the blocks that start a server on the fixed port its page
# names (marked `server` or `client`, tests/codeblock_runs.py) on one, so two never listen on port 8000 at once;
# every other block (quick runs, renders, one-off commands, which pick free ports but share build/) on the other, so
# two quick runs of one scenario never share its logs.
SHARED_FIXTURES: dict[str, set[str] | None] = {
    "test_behaviour.py": {"serving"},
    "test_browser.py": {"visits"},
    "test_hardened.py": {"patient", "impatient"},
    "test_hostile.py": {"good", "bad"},
    "test_server_files.py": {"trickled"},
    "test_harness.py": None,
    "test_new_design.py": None,
}
SITE_FILES = {"test_site.py", "test_glossary.py"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test's group, as it is collected: before any pytest_collection_modifyitems (xdist reads them there)."""
    if item.path.suffix == ".md":
        on_a_port = any(item.iter_markers("server")) or any(item.iter_markers("client"))
        item.add_marker(pytest.mark.xdist_group("code-blocks-on-ports" if on_a_port else "code-blocks"))
    elif item.path.name in SITE_FILES:
        item.add_marker(pytest.mark.xdist_group("built-site"))
    elif item.path.name in SHARED_FIXTURES:
        shared = SHARED_FIXTURES[item.path.name]
        if shared is None or shared & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


# xdist hands out the groups in the order they are collected, and tests/site/ comes last: the link check (about 50 s
# of one CPU, in test_browser.py's group of tests that need no visit) started 500 s into a 554 s run beside a busy
# loop, while the other three workers had finished. Its group goes first, so it runs while the others are busy.
FIRST = {"test_linkchecker_finds_no_broken_internal_link_or_anchor"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of FIRST's files that carry no xdist_group mark (xdist's group for them is their file) before every
    other test: a stable sort, so the order inside each group is kept. (Without xdist, test_browser.py then runs in
    two passes and sets its module fixtures up twice: slower, not wrong.)"""
    first_files = {item.path for item in items if item.name in FIRST}
    items.sort(key=lambda item: item.path not in first_files or any(item.iter_markers("xdist_group")))
