#!/usr/bin/env python3
"""Structural checks CI runs over the workspace's sources, no build needed.

- every `.rs` file has at most 600 lines (files are named for what they hold; a longer one
  holds two things);
- no function in `crates/*/src` over 120 lines but those named in `LONG_FUNCTIONS` (none
  since issue 61), each with a comment on why it reads better whole (issue 48);
- no circle of modules inside a crate: the top-level modules of each crate (files and folders
  under `src/`) must form a graph without cycles, where a module depends on another when it
  names it through `crate::` (directly, or through a name the crate root re-exports);
- no unused dependency: every crate a `Cargo.toml` lists under `[dependencies]` is named in
  that crate's library or binary sources (not only in its tests), every dev-dependency in
  something; `[package.metadata.cargo-machete] ignored = [...]` lists the deliberate
  exceptions (a dependency kept only to turn on a feature), as cargo-machete reads it.

`python3 scripts/ci/layout.py` prints each finding and exits 1 if there is any.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600
MAX_FUNCTION_LINES = 120
# (crate, function): long on purpose, each says why where it is defined.
LONG_FUNCTIONS: set = set()
SOURCE_DIRS = ("src", "tests", "examples", "benches", "fuzz_targets")


def rust_files(crate: Path, dirs=SOURCE_DIRS) -> list[Path]:
    out: list[Path] = []
    for d in dirs:
        if (crate / d).is_dir():
            out.extend(sorted((crate / d).rglob("*.rs")))
    return out


def crates() -> list[Path]:
    found = sorted(p.parent for p in (ROOT / "crates").glob("*/Cargo.toml"))
    for extra in ("fuzz", "benches/peers/mock-openai"):
        if (ROOT / extra / "Cargo.toml").is_file():
            found.append(ROOT / extra)
    return found


def strip_comments(text: str) -> str:
    """The code without comments; string and char literals emptied first, so that a `//` or a
    path inside a string neither hides code nor counts as a use."""
    text = re.sub(r"'(?:\\.|[^'\\\n])'", "' '", text)
    text = re.sub(r'r#*"[^"]*"#*|"(?:\\.|[^"\\])*"', '""', text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] if "//" in line else line for line in text.splitlines())


# ---------------------------------------------------------------- file length


def long_files() -> list[str]:
    findings = []
    for crate in crates():
        for f in rust_files(crate):
            n = sum(1 for _ in f.open(encoding="utf-8"))
            if n > MAX_LINES:
                findings.append(f"{f.relative_to(ROOT)}: {n} lines (at most {MAX_LINES})")
    return findings


# ---------------------------------------------------------------- module circles


def top_modules(src: Path) -> dict[str, list[Path]]:
    """Top-level module name -> its files (a folder module's files included)."""
    mods: dict[str, list[Path]] = {}
    for f in src.iterdir():
        if f.is_file() and f.suffix == ".rs" and f.stem not in ("lib", "main"):
            mods.setdefault(f.stem, []).append(f)
        elif f.is_dir():
            files = sorted(f.rglob("*.rs"))
            if files:
                mods.setdefault(f.name, []).extend(files)
    return mods


USE_LIST = re.compile(
    r"(?:pub\s+(?:\([^)]*\)\s+)?)?use\s+(?:self::|crate::)?([a-z_][a-z0-9_]*)::(\{[^;]*\}|[A-Za-z0-9_:]+)\s*;",
    re.S,
)


def root_reexports(root: Path, modules: set[str]) -> dict[str, str]:
    """Names the crate root re-exports from one of its modules: name -> module."""
    names: dict[str, str] = {}
    text = strip_comments(root.read_text(encoding="utf-8"))
    for m in USE_LIST.finditer(text):
        module, items = m.group(1), m.group(2)
        if module not in modules:
            continue
        for item in re.split(r"[,{}\s]+", items):
            item = item.strip()
            if not item or item == "self":
                continue
            if " as " in item:
                item = item.split(" as ")[-1]
            names[item.split("::")[-1]] = module
    # `pub use module::{A as B}` leaves "as" tokens split apart: handle them
    for m in re.finditer(r"([A-Za-z0-9_]+)\s+as\s+([A-Za-z0-9_]+)", text):
        for module, in [(names.get(m.group(1)),)]:
            if module:
                names[m.group(2)] = module
    return names


def crate_paths(text: str) -> list[str]:
    """The first segment after every `crate::` path, braces of a `use crate::{...}` expanded."""
    out: list[str] = []
    for m in re.finditer(r"\bcrate::(\{)?", text):
        if m.group(1):
            depth, i = 1, m.end()
            start = i
            while i < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            inner = text[start : i - 1]
            # top-level items of the brace list
            depth, item = 0, ""
            for ch in inner + ",":
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                if ch == "," and depth == 0:
                    seg = item.strip().split("::")[0].strip()
                    if seg:
                        out.append(seg)
                    item = ""
                else:
                    item += ch
        else:
            seg = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[m.end() :])
            if seg:
                out.append(seg.group(0))
    return out


def cycles_in(crate: Path) -> list[str]:
    src = crate / "src"
    root = src / "lib.rs"
    if not root.is_file():
        return []
    mods = top_modules(src)
    names = root_reexports(root, set(mods))
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            text = strip_comments(f.read_text(encoding="utf-8"))
            if f.parent == src:
                # in a file at the crate's top, `super::` is the crate root (nested test
                # modules' `use super::*` names their own file, which is no edge)
                text = re.sub(r"\bsuper::(?!\*)", "crate::", text)
            for seg in crate_paths(text):
                target = seg if seg in mods else names.get(seg)
                if target and target != m:
                    graph[m].add(target)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in found:
        edges = ", ".join(
            f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp
        )
        out.append(f"{crate.relative_to(ROOT)}: modules in a circle: {', '.join(comp)} ({edges})")
    return out


# ---------------------------------------------------------------- unused dependencies


def ident(dep: str, spec) -> str:
    """The name the code uses: the key (a `package = ...` rename keeps the key)."""
    return dep.replace("-", "_")


def names_used(files: list[Path], keep_docs: bool = False) -> str:
    """The files' code; with `keep_docs`, doc comments too (doctests use dev-dependencies)."""
    texts = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        if keep_docs:
            text = re.sub(r"^\s*//[/!] ?", "", text, flags=re.M)
        texts.append(strip_comments(text))
    return "\n".join(texts)


def used(name: str, text: str) -> bool:
    """Named as a path (`name::x`, `#[name::attr]`) or renamed (`use name as n`,
    `extern crate name`)."""
    n = re.escape(name)
    return any(
        re.search(p, text)
        for p in (rf"(?<![A-Za-z0-9_:]){n}::", rf"\buse\s+{n}\s+as\b", rf"\bextern\s+crate\s+{n}\b")
    )


def unused_deps(crate: Path) -> list[str]:
    manifest = tomllib.loads((crate / "Cargo.toml").read_text(encoding="utf-8"))
    ignored = set(
        manifest.get("package", {}).get("metadata", {}).get("cargo-machete", {}).get("ignored", [])
    )
    lib_files = rust_files(crate, ("src", "fuzz_targets"))
    build = crate / "build.rs"
    if build.is_file():
        lib_files.append(build)
    # a crate's own tests under src/ (`#[cfg(test)]` modules) may use dev-dependencies
    all_files = rust_files(crate) + ([build] if build.is_file() else [])
    lib_text = names_used(lib_files)
    all_text = names_used(all_files, keep_docs=True)
    findings = []
    sections = [("dependencies", manifest.get("dependencies", {}), lib_text)]
    sections.append(("dev-dependencies", manifest.get("dev-dependencies", {}), all_text))
    for target, tables in manifest.get("target", {}).items():
        sections.append((f"target.{target}.dependencies", tables.get("dependencies", {}), lib_text))
        sections.append((f"target.{target}.dev-dependencies", tables.get("dev-dependencies", {}), all_text))
    for section, deps, text in sections:
        for dep, spec in deps.items():
            if dep in ignored:
                continue
            name = ident(dep, spec)
            if used(name, text):
                continue
            where = crate.relative_to(ROOT)
            if section.endswith(".dependencies") or section == "dependencies":
                only_tests = used(name, all_text)
            else:
                only_tests = False
            if only_tests:
                findings.append(
                    f"{where}: `{dep}` is used only by tests, examples or benches: move it to [dev-dependencies]"
                )
            else:
                findings.append(f"{where}: [{section}] `{dep}` is not used")
    return findings


# ---------------------------------------------------------------- function length

FN_HEADER = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every `fn` with a body in `text` (comments stripped)."""
    lines = strip_comments(text).splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FN_HEADER.match(lines[i])
        if not m:
            i += 1
            continue
        depth, opened, j = 0, False, i
        while j < len(lines):
            for ch in lines[j]:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth == 0:
                break
            if not opened and lines[j].rstrip().endswith(";"):
                break
            j += 1
        if opened:
            out.append((m.group(1), i + 1, j - i + 1))
        i += 1
    return out


def long_functions() -> list[str]:
    findings = []
    for crate in sorted(p.parent for p in (ROOT / "crates").glob("*/Cargo.toml")):
        for f in rust_files(crate, ("src",)):
            for name, line, n in functions(f.read_text(encoding="utf-8")):
                if n > MAX_FUNCTION_LINES and (crate.name, name) not in LONG_FUNCTIONS:
                    findings.append(
                        f"{f.relative_to(ROOT)}:{line}: fn {name} has {n} lines (at most "
                        f"{MAX_FUNCTION_LINES}; split it where a reader would)"
                    )
    return findings


def main() -> int:
    findings = long_files() + long_functions()
    for crate in crates():
        findings.extend(cycles_in(crate))
        findings.extend(unused_deps(crate))
    for f in findings:
        print(f)
    if findings:
        print(f"{len(findings)} finding(s)")
        return 1
    print(
        f"layout: files within {MAX_LINES} lines, functions within {MAX_FUNCTION_LINES} "
        f"(but the {len(LONG_FUNCTIONS)} named), no module circle, no unused dependency"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
