"""MkDocs hooks: put the site's own copy of mermaid into the build, so no page loads a CDN; and move a notebook
page's inlined stylesheets into one file.

scripts/install_site_assets.sh (run by `make install`) fetches the pinned bundle into
build/site-assets/; this hook adds it to the built site as assets/javascripts/mermaid.min.js,
which mkdocs.yml loads before Material looks for `mermaid` (Material fetches it from unpkg.com
only when it is undefined). A build without the bundle fails and says how to get it.

mkdocs-jupyter writes Jupyter's whole stylesheet (about 590 KB) into every notebook page as `<style>` blocks,
which put the notebook page past the 400 KB page budget (issue 35, tests/page_weight.py) with 491 words on it.
on_post_page moves those blocks, in their order, into assets/notebook-<hash>.css and links it where the first
one was: the same rules, read once and cached.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

SITE_ASSETS = Path(__file__).resolve().parent.parent / "build" / "site-assets"
MERMAID_URI = "assets/javascripts/mermaid.min.js"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    bundle = SITE_ASSETS / "mermaid.min.js"
    if not bundle.exists():
        raise PluginError(f"{bundle} is missing: run `make install` (scripts/install_site_assets.sh fetches it from npm)")
    files.append(File.generated(config, MERMAID_URI, abs_src_path=str(bundle)))
    return files


NOTEBOOK_STYLE = re.compile(r'<style type="text/css">(?P<css>.*?)</style>', re.S)


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    """A notebook page's inlined stylesheets, moved to one linked file under assets/."""
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    blocks = list(NOTEBOOK_STYLE.finditer(output))
    if not blocks:
        return output
    css = "\n".join(block["css"] for block in blocks)
    name = f"assets/notebook-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    target = Path(config.site_dir) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(css, encoding="utf-8")
    link = f'<link rel="stylesheet" href="{"../" * page.url.count("/")}{name}">'
    first = blocks[0]
    return output[:first.start()] + link + NOTEBOOK_STYLE.sub("", output[first.end():])
