"""The documentation site: the generated protocol reference, and the strict build itself."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from codexcore.protocol import protocol_schema
from codexcore.protocol._wire import CONNECTION_MSGS, EVENT_MSGS, OPS

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "docs" / "hooks"
NO_DOCS_EXTRA = "the docs extra is not installed (pip install -e '.[docs]')"


def load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", HOOKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> str:
    text: str = load_hook("protocol_reference").render_protocol_reference()
    return text


@pytest.mark.parametrize(
    ("prefix", "tags"),
    [
        ("op", sorted(OPS.by_tag)),
        ("event", sorted(EVENT_MSGS.by_tag)),
        ("conn", sorted(CONNECTION_MSGS.by_tag)),
    ],
)
def test_every_registered_variant_has_a_section(
    reference: str, prefix: str, tags: list[str]
) -> None:
    headings = set(re.findall(r"^### `([a-z_]+)` \{#" + prefix + r"-\1\}$", reference, re.M))
    assert headings == set(tags)


def test_every_variant_shows_its_golden_example(reference: str) -> None:
    for folder in ("ops", "events", "handshake"):
        for path in sorted((ROOT / "tests" / "golden" / folder).glob("*.json")):
            example = json.dumps(json.loads(path.read_text()), indent=2, ensure_ascii=False)
            assert example in reference, path


def test_every_field_of_the_schema_is_listed(reference: str) -> None:
    for name, definition in protocol_schema()["$defs"].items():
        for field in definition.get("properties", {}):
            assert f"| `{field}` |" in reference, (name, field)


def test_required_default_and_allowed_values(reference: str) -> None:
    section = reference.split("{#event-session_configured}")[1].split("\n### ")[0]
    assert "| `session_id` | string | yes |  |  |" in section
    assert '| `sandbox` | string | no | `bwrap`, `none` | `"none"` |' in section
    assert (
        "| `reasoning_effort` | string or null | no | `minimal`, `low`, `medium`, `high`" in section
    )


def test_a_variant_without_a_golden_fixture_is_a_problem() -> None:
    hook = load_hook("protocol_reference")
    schema = protocol_schema()
    defs = schema["$defs"]
    defs["Brand_new"] = {**defs["Interrupt"], "title": "brand_new"}
    defs["Brand_new"]["properties"] = {"type": {"const": "brand_new"}}
    defs["Op"]["oneOf"].append({"$ref": "#/$defs/Brand_new"})
    with pytest.raises(hook.ProtocolReferenceError, match="brand_new"):
        hook.render_protocol_reference(schema)


def test_the_reference_page_is_a_placeholder() -> None:
    page = (ROOT / "docs" / "reference" / "protocol.md").read_text()
    hook = load_hook("protocol_reference")
    assert hook.MARKER in page
    assert "### `" not in page  # nothing generated is committed


def test_rst_roles_become_optional_cross_references() -> None:
    pytest.importorskip(
        "griffe", reason="the docs extra (pip install -e '.[docs]') is not installed"
    )
    rewrite = load_hook("griffe_rst").rewrite
    assert rewrite(":class:`~codexcore.Codex`\\ s, then::\n\n    code") == (
        '<autoref identifier="codexcore.Codex" optional><code>Codex</code></autoref>s, then:'
        "\n\n    code"
    )
    # Sphinx's explicit title: the text before <target> shows, the target links.
    assert rewrite(":attr:`the tools <codexcore.Codex.tools>`") == (
        '<autoref identifier="codexcore.Codex.tools" optional><code>the tools</code></autoref>'
    )


RUNNABLE_PAGES = ("index.md", "quickstart.md")


def python_blocks(page: str) -> list[str]:
    text = (ROOT / "docs" / page).read_text()
    return re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(code, id=f"{page}-{number}")
        for page in RUNNABLE_PAGES
        for number, code in enumerate(python_blocks(page), 1)
    ],
)
def test_python_blocks_of_the_quick_start_run(code: str, tmp_path: Path) -> None:
    """Every ```python block of the home page and the quick start runs as it is, offline."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr


def test_the_testing_pages_tests_run_as_written_under_plain_pytest(tmp_path: Path) -> None:
    """docs/testing.md's test file, as a reader copies it: pytest with no async plugin
    (anyio's is turned off) and none of this project's configuration."""
    blocks = [code for code in python_blocks("testing.md") if "def test_" in code]
    assert len(blocks) == 1, "docs/testing.md has one runnable test file"
    (tmp_path / "test_from_the_docs.py").write_text(blocks[0])
    plain = ["-p", "no:anyio", "-p", "no:cacheprovider", "-W", "error"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plain, "test_from_the_docs.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout, result.stdout


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """What .ci/run does; skipped where the docs extra is not installed."""
    pytest.importorskip(
        "mkdocs", reason="the docs extra (pip install -e '.[docs]') is not installed"
    )
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings-python is missing")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    page = (site / "reference" / "protocol" / "index.html").read_text()
    for tag in OPS.by_tag:
        assert f'id="op-{tag}"' in page
    for tag in EVENT_MSGS.by_tag:
        assert f'id="event-{tag}"' in page
    assert (site / "api" / "codexcore" / "index.html").exists()
    # Offline: no page loads a script, style sheet or font from another host.
    for html in site.rglob("*.html"):
        text = html.read_text()
        assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', text), html
    shutil.rmtree(site)
