"""MkDocs hooks: put the site's own copy of mermaid into the build, so no page loads a CDN.

scripts/install_site_assets.sh (run by `make install`) fetches the pinned bundle into
build/site-assets/; this hook adds it to the built site as assets/javascripts/mermaid.min.js,
which mkdocs.yml loads before Material looks for `mermaid` (Material fetches it from unpkg.com
only when it is undefined). A build without the bundle fails and says how to get it.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

SITE_ASSETS = Path(__file__).resolve().parent.parent / "build" / "site-assets"
MERMAID_URI = "assets/javascripts/mermaid.min.js"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    bundle = SITE_ASSETS / "mermaid.min.js"
    if not bundle.exists():
        raise PluginError(f"{bundle} is missing: run `make install` (scripts/install_site_assets.sh fetches it from npm)")
    files.append(File.generated(config, MERMAID_URI, abs_src_path=str(bundle)))
    return files
