"""The recipe's calculator (docs/assets/recipe.js) in headless Chromium, against the Python rules it mirrors.

The page's own calculator markup (taken from docs/recipe.md), the rules JSON the renderer writes
(docs/_generated/recipe/rules.json) and the script are put in one local HTML file and opened from disk:
no server, no network. For every input set, window.recipeCompute must answer exactly what
harness.model.deployment_recipe.recipe() answers; filling the form must print the configuration the
Python prints; a nonsense input must say what is wrong; with JavaScript off the form stays hidden.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path

import pytest
from harness.model.deployment_recipe import (
    RecipeInputs,
    granian_command,
    gunicorn_conf,
    nginx_upstream,
    recipe,
    rules_json,
    uvicorn_command,
)
from harness.model.paths import REPO_ROOT
from harness.render.recipe_tables import EXAMPLES

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
PAGE = REPO_ROOT / "docs" / "recipe.md"
SCRIPT = REPO_ROOT / "docs" / "assets" / "recipe.js"
RULES = REPO_ROOT / "docs" / "_generated" / "recipe" / "rules.json"
INPUTS = [inputs for _, inputs in EXAMPLES] + [
    RecipeInputs(cores=1, rate=200, cpu_ms=0.5, wait_ms=100, max_connections=200, reserved=3, longest_s=1),
    RecipeInputs(cores=2, quota=1.5, rate=90, cpu_ms=7, wait_ms=0, longest_s=120, proxy=False),  # no database
    RecipeInputs(cores=64, rate=5000, cpu_ms=1, wait_ms=50, max_connections=100, reserved=10),  # too many, even pooled
    RecipeInputs(cores=2, rate=1000, cpu_ms=5, wait_ms=20),  # more CPU work than two CPUs
    RecipeInputs(cores=4, quota=0.5, rate=33, cpu_ms=3.3, wait_ms=33.3, longest_s=0.7),
]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - a Playwright page
    """The calculator alone, in a local HTML file, in one Chromium; every request off this disk is refused."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set CHROMIUM)")
    markup = re.search(r'<div id="recipe-calculator".*?</form>\n<div class="recipe-output".*?</div>\n</div>',
                       PAGE.read_text(encoding="utf-8"), re.S)
    assert markup, "docs/recipe.md has no calculator markup"
    html = tmp_path_factory.mktemp("recipe") / "recipe.html"
    html.write_text(f'<!doctype html><html><body>{markup.group(0)}\n'
                    f'<script type="application/json" id="recipe-rules">{RULES.read_text(encoding="utf-8")}</script>\n'
                    f'<script src="{SCRIPT.as_uri()}"></script></body></html>', encoding="utf-8")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"],
                                             proxy={"server": "http://127.0.0.1:9"})
        context = browser.new_context()
        opened = context.new_page()
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        opened.goto(html.as_uri())
        opened.wait_for_function("() => typeof window.recipeCompute === 'function'")
        opened.errors = errors
        yield opened
        context.close()
        browser.close()


def test_the_page_embeds_the_rules_the_module_has() -> None:
    assert json.loads(RULES.read_text(encoding="utf-8")) == rules_json()


@pytest.mark.parametrize("inputs", INPUTS, ids=lambda inputs: f"{inputs.cores}c-{inputs.rate:g}rps-{inputs.quota}")
def test_the_calculator_answers_what_the_python_rules_answer(page, inputs: RecipeInputs) -> None:  # noqa: ANN001
    answer = page.evaluate("inputs => window.recipeCompute(inputs)", asdict(inputs))
    assert answer == json.loads(json.dumps(recipe(inputs)))
    assert not page.errors


def fill(page, inputs: RecipeInputs) -> None:  # noqa: ANN001
    for name, value in asdict(inputs).items():
        if name == "proxy":
            page.set_checked('[name="proxy"]', value)
        else:
            page.fill(f'[name="{name}"]', "" if value is None else f"{value:g}")


def test_filling_the_form_prints_the_configuration_python_prints(page) -> None:  # noqa: ANN001
    inputs = EXAMPLES[1][1]
    fill(page, inputs)
    shown = page.inner_text(".recipe-output")
    result = recipe(inputs)
    for text in (gunicorn_conf(result), uvicorn_command(result), granian_command(result), nginx_upstream(result)):
        assert text.strip() in shown
    assert f"{result['models']['threads']['workers']} workers × {result['models']['threads']['threads']} threads" in shown


def test_a_nonsense_input_says_what_is_wrong(page) -> None:  # noqa: ANN001
    fill(page, EXAMPLES[0][1])
    page.fill('[name="cores"]', "0")
    assert "cores must be 1 or more" in page.inner_text(".recipe-error")
    page.fill('[name="reserved"]', "100")
    page.fill('[name="cores"]', "2")
    assert "must be above the reserved slots" in page.inner_text(".recipe-error")


def test_without_javascript_the_form_stays_hidden(page) -> None:  # noqa: ANN001
    context = page.context.browser.new_context(java_script_enabled=False)
    try:
        quiet = context.new_page()
        quiet.goto(page.url)
        assert not quiet.is_visible("#recipe-calculator")
    finally:
        context.close()
    assert page.is_visible("#recipe-calculator")
