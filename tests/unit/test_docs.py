"""The documentation stays true to the code.

* Every ``streamops ...`` command line in a shell code block of README.md and docs/*.md parses with
  the CLI's own parser (parse only: nothing runs). ``.venv/bin/streamops``, ``VAR=value`` prefixes,
  backslash continuations, pipes and ``$(...)`` are handled; placeholders such as ``APP`` or
  ``$VAR`` are fine wherever the option takes a string.
* Every markdown link stays inside the repository and points at a file that exists (and, for
  ``file.md#anchor``, at a heading that exists); http(s) links only to localhost examples.
* Every ``make`` target the docs name exists in the Makefile.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from streamops.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: fenced blocks whose lines are shell commands (an empty info string counts)
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "zsh"}
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)")


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


# -- markdown structure ----------------------------------------------------------------------------
@dataclass
class Block:
    path: Path
    info: str
    first_line: int  # 1-based line number of the block's first content line
    lines: list[str]


def split_markdown(path: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """(fenced code blocks, prose lines with their 1-based numbers) of a markdown file."""
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    current: Block | None = None
    closing = ""
    indent = 0
    for no, line in enumerate(path.read_text().splitlines(), start=1):
        if current is None:
            m = FENCE.match(line)
            if m:
                closing, indent = m["fence"], len(m["indent"])
                current = Block(path, m["info"].lower(), no + 1, [])
            else:
                prose.append((no, line))
        elif line.strip().startswith(closing[0] * len(closing)) and not line.strip().strip(closing[0]):
            blocks.append(current)
            current = None
        else:
            current.lines.append(line[indent:] if line[:indent].strip() == "" else line)
    assert current is None, f"{rel(path)}: code block opened at line {current.first_line - 1} is never closed"
    return blocks, prose


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """The block's lines with backslash continuations joined, each with its first line number."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for i, line in enumerate(block.lines):
        if not pending:
            start = block.first_line + i
        if block.info == "console" and not pending:
            if not line.startswith("$ "):
                continue  # output, not a command
            line = line[2:]
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


# -- shell commands --------------------------------------------------------------------------------
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
OPERATORS = set("();<>|&")


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line, as word lists (variable assignments in front dropped).

    ``$(`` starts a command of its own; pipes, ``&&``, ``||``, ``;``, ``&``, parentheses and
    redirections end one. Quoted text stays one word, ``#`` starts a comment."""
    lexer = shlex.shlex(line.replace("$(", "; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = []
    words: list[str] = []
    for token in lexer:
        if token and set(token) <= OPERATORS:
            commands.append(words)
            words = []
        else:
            words.append(token)
    commands.append(words)
    out = []
    for words in commands:
        while words and ASSIGNMENT.match(words[0]):
            words = words[1:]
        if words and words[0] == "env":
            words = words[1:]
            while words and ASSIGNMENT.match(words[0]):
                words = words[1:]
        if words:
            out.append(words)
    return out


def streamops_argv(words: list[str]) -> list[str] | None:
    """The arguments after ``streamops`` if these words run the CLI, else None."""
    head = words[0]
    if head == "streamops" or head.endswith("/streamops"):
        return words[1:]
    if len(words) >= 3 and Path(head).name.startswith("python") and words[1] == "-m" \
            and words[2] in ("streamops", "streamops.cli"):
        return words[3:]
    return None


def mentions_streamops_command(line: str) -> bool:
    """A rough check that does not depend on tokenizing: is ``streamops`` used as a command here?"""
    return re.search(r"(^|[\s;&|(])(\S*/)?streamops(\s|$)", line) is not None


def shell_lines() -> list[tuple[str, int, str]]:
    out = []
    for path in DOCS:
        blocks, _prose = split_markdown(path)
        for block in blocks:
            if block.info in SHELL_BLOCKS:
                out.extend((rel(path), no, line) for no, line in logical_lines(block))
    return out


def collect_commands() -> list[pytest.param]:
    params, seen = [], {}
    for where, no, line in shell_lines():
        try:
            commands = simple_commands(line)
        except ValueError as exc:  # unbalanced quotes: fail the line if it looks like a command
            if mentions_streamops_command(line):
                params.append(pytest.param(line, None, f"cannot tokenize: {exc}", id=f"{where}:{no}"))
            continue
        for words in commands:
            argv = streamops_argv(words)
            if argv is None:
                continue
            base = f"{where}:{no}"
            seen[base] = seen.get(base, 0) + 1
            test_id = base if seen[base] == 1 else f"{base}#{seen[base]}"
            params.append(pytest.param(line, argv, None, id=test_id))
    return params


COMMANDS = collect_commands()


@pytest.mark.parametrize(("line", "argv", "problem"), COMMANDS)
def test_documented_command_parses(line: str, argv: list[str] | None, problem: str | None,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert problem is None, f"{problem}: {line}"
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        err = capsys.readouterr().err.strip().splitlines()
        pytest.fail(f"`streamops {shlex.join(argv)}` does not parse (exit {exc.code}): "
                    f"{err[-1] if err else ''}\nline: {line}")


def test_the_docs_have_commands_to_check() -> None:
    """Guards the extraction itself: the README's walk-through alone has more than ten."""
    readme = [p for p in COMMANDS if p.id.startswith("README.md:")]
    assert len(readme) >= 10, [p.id for p in readme]
    assert len(COMMANDS) >= 50, len(COMMANDS)


def test_command_extraction() -> None:
    assert simple_commands('A=1 .venv/bin/streamops status x --json | jq . && streamops stop x  # c') == [
        [".venv/bin/streamops", "status", "x", "--json"], ["jq", "."], ["streamops", "stop", "x"]]
    assert simple_commands("ID=$(.venv/bin/streamops savepoints app --json | head -1)") == [
        [".venv/bin/streamops", "savepoints", "app", "--json"], ["head", "-1"]]
    assert simple_commands("""streamops reprocess a --from '{"t": {"0": 1}}' --to latest""") == [
        ["streamops", "reprocess", "a", "--from", '{"t": {"0": 1}}', "--to", "latest"]]
    block = Block(Path("x"), "bash", 1, ["streamops resize a \\", "  --parallelism 2", "make run"])
    assert logical_lines(block) == [(1, "streamops resize a    --parallelism 2"), (3, "make run")]
    assert streamops_argv(["python", "-m", "streamops.cli", "status"]) == ["status"]
    assert streamops_argv(["ls", "streamops"]) is None


# -- links -----------------------------------------------------------------------------------------
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
BARE_URL = re.compile(r"(?<![(<\w])(https?://[^\s)>\]`]+)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    _blocks, prose = split_markdown(path)
    out: set[str] = set()
    for _no, line in prose:
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m[1])
            name, n = base, 0
            while name in out:
                n += 1
                name = f"{base}-{n}"
            out.add(name)
    return out


def links() -> list[pytest.param]:
    params = []
    for path in DOCS:
        _blocks, prose = split_markdown(path)
        for no, line in prose:
            text = INLINE_CODE.sub("", line)
            found = [m[1] for m in INLINE_LINK.finditer(text)] + [m[1] for m in AUTOLINK.finditer(text)]
            m = REFERENCE.match(text)
            if m:
                found.append(m[1])
            found += BARE_URL.findall(AUTOLINK.sub("", INLINE_LINK.sub("", text)))  # GitHub links these too
            for i, target in enumerate(found):
                test_id = f"{rel(path)}:{no}" + (f"#{i + 1}" if i else "")
                params.append(pytest.param(path, target, id=test_id))
    return params


LINKS = links()


def link_problem(source: Path, target: str) -> str | None:
    """Why ``target`` (a link in ``source``) is not allowed, None if it is fine."""
    parts = urlsplit(target)
    if parts.scheme in ("http", "https"):
        if parts.hostname in LOCAL_HOSTS:
            return None
        return f"{target} points outside the repository (only localhost examples may be URLs)"
    if parts.scheme or parts.netloc:
        return f"{target} points outside the repository"
    if target.startswith("/"):
        return f"{target} is absolute; link relative to {rel(source)}"
    if parts.path:
        dest = (source.parent / unquote(parts.path)).resolve()
        try:
            dest.relative_to(REPO)
        except ValueError:
            return f"{target} points outside the repository"
        if not dest.exists():
            return f"{target}: no such file in the repository ({dest.relative_to(REPO).as_posix()})"
    else:
        dest = source
    if parts.fragment and dest.suffix == ".md" and parts.fragment not in anchors(dest):
        return f"{target}: no heading #{parts.fragment} in {dest.relative_to(REPO).as_posix()}"
    return None


@pytest.mark.parametrize(("source", "target"), LINKS)
def test_link_stays_in_the_repository(source: Path, target: str) -> None:
    problem = link_problem(source, target)
    assert problem is None, f"{rel(source)}: {problem}"


def test_the_docs_have_links_to_check() -> None:
    assert any(p.values[1] == "docs/benchmarks.md" for p in LINKS), "README must link docs/benchmarks.md"
    assert len(LINKS) >= 10, len(LINKS)


def test_link_checks() -> None:
    readme = REPO / "README.md"
    assert link_problem(readme, "../shared/ARCHITECTURE.md") is not None
    assert link_problem(readme, "https://example.com/x") is not None
    assert link_problem(readme, "docs/no-such-page.md") is not None
    assert link_problem(readme, "http://127.0.0.1:8080") is None
    assert link_problem(readme, "docs/benchmarks.md") is None
    assert link_problem(readme, "docs/operations.md#no-such-heading") is not None
    assert slug("App specs: include/streams.yaml") == "app-specs-includestreamsyaml"
    assert slug("Deploy, stop, status") == "deploy-stop-status"


# -- make targets ----------------------------------------------------------------------------------
def makefile_targets() -> set[str]:
    targets = set()
    for line in (REPO / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*:(?!=)", line)
        if m:
            targets.update(t for t in m[1].split() if not t.startswith("."))
    return targets


def named_make_targets() -> list[tuple[str, int, str]]:
    """(file, line, target) for every `make TARGET` in shell blocks and in inline code."""
    out = []
    for where, no, line in shell_lines():
        try:
            commands = simple_commands(line)
        except ValueError:
            continue
        for words in commands:
            if words[0] == "make":
                out += [(where, no, w) for w in words[1:] if not w.startswith("-") and "=" not in w]
    for path in DOCS:
        _blocks, prose = split_markdown(path)
        for no, line in prose:
            for m in INLINE_CODE.finditer(line):
                words = m[2].split()
                if len(words) >= 2 and words[0] == "make":
                    out += [(rel(path), no, w) for w in words[1:] if not w.startswith("-") and "=" not in w]
    return out


def test_named_make_targets_exist() -> None:
    named = named_make_targets()
    targets = makefile_targets()
    assert {"run", "test"} <= {t for _w, _n, t in named if _w == "README.md"}, "README must name make run/test"
    missing = [f"{w}:{n}: make {t}" for w, n, t in named if t not in targets]
    assert not missing, f"not in the Makefile ({sorted(targets)}): {missing}"
