"""The docs cite only what exists: every ``memtier_plugin`` path and every ``memtier`` command (datasette's test_docs)."""

from __future__ import annotations

import importlib
import re

import click
import pytest

from conftest import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "hooks" / "README.md",
               ROOT / "benchmarks" / "README.md", ROOT / "workspace-fixtures" / "README.md"])
DOTTED = re.compile(r"\bmemtier_plugin(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
SLASHED = re.compile(r"\bmemtier_plugin/[A-Za-z0-9_./-]*[A-Za-z0-9_]")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)


def cited(pattern: re.Pattern) -> list[tuple[str, str]]:
    return sorted({(doc.relative_to(ROOT).as_posix(), m) for doc in DOCS for m in pattern.findall(doc.read_text())})


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc,path", cited(DOTTED))
def test_cited_module_paths_exist(doc, path):
    assert resolves(path), f"{doc} cites {path}, which does not exist"


@pytest.mark.parametrize("doc,path", cited(SLASHED))
def test_cited_file_paths_exist(doc, path):
    assert (ROOT / path).exists() or (ROOT / f"{path}.py").exists(), f"{doc} cites {path}, which does not exist"


def command_lines() -> list[tuple[str, str]]:
    """``memtier …`` as written in code spans and code blocks."""
    out = set()
    for doc in DOCS:
        text = doc.read_text()
        pieces = CODE_SPAN.findall(FENCE.sub("", text))
        for block in FENCE.findall(text):
            pieces += [line.split(" #", 1)[0] for line in block.splitlines()]  # comments are prose
        for piece in pieces:
            for m in re.finditer(r"(?:^|[\s/(&;|])memtier((?: [^\s#|;&)]+)+)", piece):
                if not m.group(1).split()[0].endswith(":"):  # "memtier daemon: watching" is output
                    out.add((doc.relative_to(ROOT).as_posix(), m.group(1).strip()))
    return sorted(out)


def words(args: str) -> list[str]:
    toks = args.split()
    out, i = [], 0
    while i < len(toks):  # skip the global options and their values
        if toks[i] in ("-w", "--workspace", "-c", "--config", "--preset"):
            i += 2
            continue
        if toks[i].startswith("-"):
            break
        out.append(toks[i])
        i += 1
    return out


def test_docs_cite_some_commands():
    assert len(command_lines()) > 20


@pytest.mark.parametrize("doc,args", command_lines())
def test_cited_commands_exist(doc, args):
    from memtier_plugin.cli import cli

    cmd: click.Command = cli
    for word in words(args):
        if not isinstance(cmd, click.Group):
            break  # the rest are the command's arguments
        sub = cmd.get_command(click.Context(cmd), word)
        if sub is None:
            if word.isupper() or not word.isalpha() or cmd is not cli:
                # an argument (PATH, a value) of a group that takes one, or a placeholder
                assert cmd is not cli, f"{doc}: `memtier {args}`: no command {word!r}"
                break
            raise AssertionError(f"{doc}: `memtier {args}`: no command {word!r}")
        cmd = sub
