"""docs/design.md stays true: every path it names exists in the tree, and every
C++ name it cites (`Engine::open`, `plan_memory`, ...) is defined in the sources."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
SOURCE_DIRS = ("core", "cli", "server", "plugins")


def cited(text):
    return re.findall(r"`([^`\s]+)`", text)


def is_path(word):
    return "/" in word and not word.startswith(("/v1", "--", "../shared"))


def is_cxx_name(word):
    # CamelCase types and snake_case functions, optionally qualified (Api::route).
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", word) and (
        "::" in word or "_" in word or re.search(r"[a-z][A-Z]", word))


def sources():
    for d in SOURCE_DIRS:
        for p in (ROOT / d).rglob("*"):
            if p.suffix in (".h", ".cpp", ".inc", ".cu"):
                yield p.read_text(errors="replace")


def test_every_cited_path_exists():
    missing = []
    for word in cited(DESIGN.read_text()):
        if not is_path(word):
            continue
        # "core/src/output/ (`text_stream`, ...)" style and plain files alike.
        path = word.rstrip("/").split(" ")[0]
        if not (ROOT / path).exists():
            missing.append(word)
    assert not missing, f"docs/design.md names paths that do not exist: {missing}"


def test_every_cited_name_is_defined():
    text = "\n".join(sources())
    missing = []
    names = [w for w in cited(DESIGN.read_text()) if not is_path(w) and is_cxx_name(w)]
    assert len(names) >= 10, f"the page should cite the code it describes, found {names}"
    for name in names:
        last = name.split("::")[-1]
        owner = name.split("::")[0] if "::" in name else None
        if not re.search(rf"\b{re.escape(last)}\b", text):
            missing.append(name)
        elif owner and not re.search(rf"\b(class|struct)\s+(FERROX_API\s+)?{re.escape(owner)}\b", text):
            missing.append(name)
    assert not missing, f"docs/design.md cites names the sources do not define: {missing}"
