"""For every test, here because tests/conftest.py only reaches the items under tests/: the code-block
runner for README.md and docs/, and which tests share an xdist worker."""

import pytest

pytest_plugins = ["tests.codeblock_runs", "tests.tiers"]


# `make test` runs the suite on several workers (pytest-xdist, --dist loadgroup). Tests that share an
# expensive fixture stay on one worker: file by file (test_new_design's scratch copy of the repository was made,
# built and rendered once per worker that ran one of its tests: 75 s each), and the two files that read the built site
# without a browser together; the browser's file, the longest group (every page visited twice), has a
# worker of its own. The site is built once per run whichever worker asks first (tests/conftest.py's
# strict_build), and so is the whole render (`rendered`). The docs' code blocks run on two workers, each
# group in page order: the blocks that start a server on the fixed port its page names (marked `server` or
# `client`, tests/codeblock_runs.py) on one, so two never listen on port 8000 at once; every other block
# (quick runs, renders, one-off commands, which pick free ports but share build/) on the other, so two quick
# runs of one scenario never share its logs.
ONE_WORKER_FILES = {"test_hardened.py", "test_hostile.py", "test_server_files.py", "test_behaviour.py", "test_harness.py",
                    "test_browser.py", "test_new_design.py"}
SITE_FILES = {"test_site.py", "test_glossary.py"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test's group, as it is collected: before any pytest_collection_modifyitems (xdist reads them there)."""
    if item.path.suffix == ".md":
        on_a_port = any(item.iter_markers("server")) or any(item.iter_markers("client"))
        item.add_marker(pytest.mark.xdist_group("code-blocks-on-ports" if on_a_port else "code-blocks"))
    elif item.path.name in SITE_FILES:
        item.add_marker(pytest.mark.xdist_group("built-site"))
    elif item.path.name in ONE_WORKER_FILES:
        item.add_marker(pytest.mark.xdist_group(item.path.stem))
