"""docs/semantics.md is what the code and tests cite: every citation names one of its sections,
and nothing cites a document the repository does not hold."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = set(re.findall(r"^## (.+)$", (ROOT / "docs" / "semantics.md").read_text(), re.M))


def sources():
    for folder in ("lazyfuse", "tests", "bench", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".h") and path.is_file():
                yield path, " ".join(path.read_text().split())   # a citation may wrap across lines


def test_every_citation_names_a_section():
    cited, unknown = set(), []
    for path, text in sources():
        for names in re.findall(r"docs/semantics\.md, ([^):.]+)", text):
            for name in (n.strip() for n in names.split(";")):
                cited.add(name)
                if name not in SECTIONS:
                    unknown.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert unknown == [], f"sections are {sorted(SECTIONS)}"
    assert {"Elision", "Views and in-place writes", "Capture"} <= cited   # the scan finds citations


def test_nothing_cites_the_spec_or_files_outside_the_repository():
    stale = [str(p.relative_to(ROOT)) for p, text in sources()
             if re.search(r"SPEC (semantic|\d)|\bshared/reference|PEERS\.md", text) and p.name != Path(__file__).name]
    assert stale == []
