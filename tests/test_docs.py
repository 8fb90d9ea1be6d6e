"""The README is a product page that names what RLinf's examples hold, and every relative link in the docs
resolves, so a newcomer never lands on a missing page."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "packages").glob("*/README.md")), *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_a_short_product_page_naming_every_family_policy_and_algorithm():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert len((ROOT / "packages" / "trainer" / "README.md").read_text().splitlines()) <= 350
    for package_readme in sorted((ROOT / "packages").glob("*/README.md")):
        assert len(package_readme.read_text().splitlines()) <= 400, f"{package_readme} is a reference: <= 400 lines"
    support = readme.split("## What it supports", 1)[1].split("\n## ", 1)[0]
    for name in ("MetaWorld", "ManiSkill3", "GSEnv", "LIBERO", "CALVIN", "| pi0 ", "| pi0.5 ", "| OpenVLA ",
                 "| OpenVLA-OFT ", "| PPO ", "| GRPO "):
        assert name in support, name
    results = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in results.splitlines() if line.startswith("| ") and "docs/experiments/" in line]
    assert rows and all(re.search(r"\d\.\d\d -> \d\.\d\d", row) for row in rows)
    assert "MIT" in readme and (ROOT / "LICENSE").is_file()


@pytest.mark.sim
def test_the_readme_python_runs():
    from vlarl_envs.testing import require_simulator

    require_simulator("metaworld")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    chunk = namespace["policy"].config.action_chunk
    assert namespace["again"].logprobs.shape == namespace["out"].logprobs.shape == (1, chunk, 4)


@pytest.mark.sim
def test_the_readme_python_as_a_script_exits_without_a_traceback(tmp_path):
    """As a new user runs it: the blocks joined in order as one script, rendering through EGL, and nothing
    printed at interpreter exit (MuJoCo's renderers freed before their display goes)."""
    import os
    import subprocess
    import sys

    from vlarl_envs.testing import require_simulator

    require_simulator("metaworld")
    script = tmp_path / "quick_start.py"
    script.write_text("\n".join(re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"})
    assert done.returncode == 0 and "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


@pytest.mark.parametrize("page", DOCS, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
