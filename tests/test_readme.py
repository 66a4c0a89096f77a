"""README.md is the user contract: its Quick start commands are the ones CI runs, and every
```python snippet runs as written, each in a fresh empty directory.

How snippets run
----------------
Each ```python fence is one test, run as a script in a fresh interpreter (as a user would
run it: ``if __name__ == "__main__":`` guards work, spawned workers re-import it, and no
state or thread is shared with the test process) with a fresh empty temporary directory as
its current directory. Line numbers in its tracebacks are README.md's. A snippet may be
preceded (blank lines allowed) by one HTML comment, invisible on GitHub, holding
space-separated directives:

    <!-- readme-test: continues needs=s3,ray -->

``continues``
    The snippet follows on from the previous ```python snippet: the test runs that one first
    (and whatever it continues from) in the same script.
``needs=NAME[,NAME...]``
    The snippet needs something a plain directory lacks (a server, a cluster, credentials).
    Each NAME is the pytest fixture ``readme_NAME`` (defined below or in a conftest.py),
    requested before the chain runs. Such a fixture prepares what the snippet needs (a server
    it finds through the environment, as a user's would), cleans up after itself, and returns
    None or a dict of environment variables for the script. Fixtures that start servers
    listen on 127.0.0.1 only. An unknown directive or a NAME without a fixture fails the test.

To add a snippet needing a new system, write its ``readme_<name>`` fixture and put the
comment above the fence; nothing else changes.
"""

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

_FENCE = re.compile(
    r"(?:<!--\s*readme-test:(?P<directives>[^>]*?)-->\s*\n(?:[ \t]*\n)*)?"
    r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$",
    flags=re.S | re.M,
)


@dataclass
class Snippet:
    line: int  # of the ```python fence, 1-based
    section: str  # the heading above it
    code: str
    continues: bool
    needs: tuple


def _readme() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def python_snippets(text=None) -> list:
    text = _readme() if text is None else text
    snippets = []
    for m in _FENCE.finditer(text):
        continues, needs = False, ()
        for word in (m.group("directives") or "").split():
            if word == "continues":
                continues = True
            elif word.startswith("needs="):
                needs += tuple(n for n in word[len("needs="):].split(",") if n)
            else:
                raise ValueError(f"README.md: unknown readme-test directive {word!r}")
        fence = m.start("code") - len("```python\n")
        headings = re.findall(r"^#+ (.+)$", text[:fence], flags=re.M)
        snippets.append(Snippet(text.count("\n", 0, fence) + 1, headings[-1] if headings else "",
                                m.group("code"), continues, needs))
    return snippets


def _chain(snippets, i) -> list:
    """The snippet and those it continues from, in running order."""
    chain = [snippets[i]]
    while chain[0].continues:
        i -= 1
        assert i >= 0, f"README.md:{chain[0].line}: 'continues' but no ```python snippet before it"
        chain.insert(0, snippets[i])
    return chain


SNIPPETS = python_snippets()


def test_every_python_fence_is_found():
    text = _readme()
    assert len(SNIPPETS) == len(re.findall(r"^```python", text, flags=re.M)) >= 5
    assert [s.line for s in SNIPPETS] == [n + 1 for n, line in enumerate(text.splitlines())
                                          if line.startswith("```python")]


def test_directives_parse():
    text = ("# A\n```python\nx = 1\n```\n## B\n<!-- readme-test: continues needs=s3,ray -->\n\n"
            "```python\ny = x\n```\n")
    first, second = python_snippets(text)
    assert (first.section, first.continues, first.needs, first.code) == ("A", False, (), "x = 1\n")
    assert (second.section, second.line, second.continues, second.needs) == ("B", 8, True, ("s3", "ray"))
    assert [s.line for s in _chain([first, second], 1)] == [2, 8]
    with pytest.raises(ValueError, match="unknown readme-test directive 'bogus'"):
        python_snippets("<!-- readme-test: bogus -->\n```python\npass\n```\n")


@pytest.fixture
def readme_s3(s3_server):
    """``needs=s3``: the loopback S3 server, found through the environment as a user's
    AWS_ENDPOINT_URL would point at theirs, with an empty my-bucket/data/."""
    fs = s3_server.filesystem()
    if fs.exists("my-bucket/data"):
        fs.rm("my-bucket/data", recursive=True)
    fs.invalidate_cache()
    return s3_server.env


@pytest.mark.parametrize("i", range(len(SNIPPETS)),
                         ids=[f"L{s.line}-{re.sub(r'[^A-Za-z0-9]+', '-', s.section).strip('-')}"
                              for s in SNIPPETS])
def test_python_snippet_runs(i, tmp_path, request):
    chain = _chain(SNIPPETS, i)
    provided = {}
    for need in dict.fromkeys(n for s in chain for n in s.needs):
        try:
            provided.update(request.getfixturevalue(f"readme_{need}") or {})
        except pytest.FixtureLookupError:
            pytest.fail(f"README.md:{chain[-1].line}: needs={need}, but there is no readme_{need} fixture")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
           **provided}
    script, lines = [], 0
    for snippet in chain:  # padded so that line numbers are README.md's
        script.append("\n" * (snippet.line - lines) + snippet.code)
        lines = snippet.line + snippet.code.count("\n")
    (tmp_path / "script").mkdir()
    (tmp_path / "cwd").mkdir()
    path = tmp_path / "script" / "README.md.py"
    path.write_text("".join(script), encoding="utf-8")
    out = subprocess.run([sys.executable, str(path)], cwd=tmp_path / "cwd", env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"README.md:{chain[-1].line} failed:\n{out.stderr[-5000:]}"


def quick_start_commands():
    section = _readme().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def test_two_commands_demo_then_tests():
    commands = quick_start_commands()
    assert len(commands) == 2
    assert commands[0].endswith("tfrecord-lite demo")
    assert "[test]" in commands[1] and "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert quick_start_commands()[1] in ci.splitlines()
