"""The repository stands on its own: the README stays an entry point into docs/, and nothing refers to the
workspace the project was written in (its design lives in docs/architecture/)."""

import re
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {".git", ".venv", ".data", ".site", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache",
                ".hypothesis", "staticfiles"}
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".json", ".js", ".css"}
# Spelled in parts so that this file matches neither itself nor a grep for the same words.
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", r"\bshared" + "/(reference|seeds)", "DESIGN" + r"\.md"]))


def project_files():
    for path in BASE_DIR.rglob("*"):
        relative = path.relative_to(BASE_DIR)
        if path.is_file() and path.suffix in TEXT_SUFFIXES and not SKIPPED_DIRS & set(relative.parts[:-1]) \
                and not any(part.endswith(".egg-info") for part in relative.parts):
            yield relative.as_posix(), path


def test_the_readme_is_an_entry_point_of_at_most_250_lines():
    lines = (BASE_DIR / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the detail into a page of docs/"
    assert "docs/index.md" in "\n".join(lines)


def test_no_file_refers_to_the_workspace_outside_the_repository():
    found = []
    for name, path in project_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            match = OUTSIDE.search(line)
            if match:
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "refer to a page of docs/ instead:\n" + "\n".join(found)


# A folder named from a file's own place: `Path(__file__).resolve().parents[1]` or `.parent.parent`.
ANCESTOR = re.compile(r"__file__\)(?:\.resolve\(\))?(?:\.parents\[(\d+)\]|((?:\.parent\b)+))")


def ancestors_outside(name: str, text: str) -> list[str]:
    """The lines of `text` (the file at `name`, relative to the repository) that name a folder above the
    repository: the code and the tests read nothing beside the checkout (a fresh clone has nothing there)."""
    depth = name.count("/")  # tests/kube_rules.py: parents[0] is tests/, parents[1] the repository
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in ANCESTOR.finditer(line):
            up = int(match[1]) if match[1] is not None else match[2].count(".parent") - 1
            if up > depth:
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_no_code_reads_a_folder_beside_the_repository():
    found = [line for name, path in project_files() if name.endswith(".py")
             for line in ancestors_outside(name, path.read_text(encoding="utf-8"))]
    assert not found, "keep what the code or the tests read inside the repository:\n" + "\n".join(found)
    here = "Path(" + "__file__).resolve()"  # spelled in parts, as above
    outside = here + ".parents" + '[2] / "crds"'
    assert ancestors_outside("tests/kube_rules.py", outside) and not ancestors_outside("tests/a/b.py", outside)
    assert ancestors_outside("tests/x.py", here + ".parent" * 3)
    assert not ancestors_outside("tests/x.py", here + ".parent" * 2)


def test_the_check_finds_what_it_looks_for():
    assert OUTSIDE.search("see " + ".." + "/shared" + "/notes")
    assert OUTSIDE.search("(" + "DESIGN" + ".md section 3)")
    assert OUTSIDE.search("a copy of shared" + "/seeds/000")
    assert not OUTSIDE.search("/api/configs/role/osmo-shared" + "/")


# How the code reads a setting: the strict readers of osmo_site.env, or the environment itself.
SETTING_READ = re.compile(r"""(?:\benv_[a-z_]+|environ\.get|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
                          r"""|environ\[["']([A-Z][A-Z0-9_]+)["']\]""")
NOT_SETTINGS = {"PYTEST_XDIST_WORKER",  # set by pytest-xdist for its workers
                "OSMO_COPY_PLAN",  # the plan dispatch gives a task pod's copy steps (scheduling/specs/osmo_copy.py)
                "JOB_COMPLETION_INDEX"}  # what the Job controller sets in an indexed Job's containers: the replica


def test_every_setting_the_code_reads_is_on_the_settings_page():
    page = (BASE_DIR / "docs" / "operations" / "settings.md").read_text(encoding="utf-8")
    sources = [path for package in ("osmo_site", "pools", "scheduling", "deploy") for path in
               (BASE_DIR / package).rglob("*.py")] + [BASE_DIR / "manage.py"]
    read = {name for path in sources for match in SETTING_READ.finditer(path.read_text(encoding="utf-8"))
            for name in match.groups() if name} - NOT_SETTINGS
    assert len(read) > 80, read
    # The first cell of each row of the page's tables: one variable, or a few read together (`HOST`, `PORT`).
    documented = {name for line in page.splitlines() if line.startswith("| `")
                  for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1])}
    missing = sorted(read - documented)
    assert not missing, f"settings read by the code but not in docs/operations/settings.md: {missing}"


def test_the_site_loads_nothing_from_the_internet():
    """Material fetches Google Fonts unless `theme.font` is false, and loads mermaid from a CDN when a page holds a
    mermaid diagram (the diagrams here are text); extra assets must be files of the site."""
    import yaml

    config = yaml.safe_load((BASE_DIR / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["theme"]["name"] == "material" and config["theme"]["font"] is False
    assert config.get("strict") is True
    external = [asset for key in ("extra_css", "extra_javascript") for asset in config.get(key, [])
                if "//" in str(asset)]
    assert not external, external
    mermaid = [name for name, _ in project_files() if name.startswith("docs/")
               and "```mermaid" in (BASE_DIR / name).read_text(encoding="utf-8")]
    assert not mermaid, f"mermaid diagrams load their script from the internet: {mermaid}"
