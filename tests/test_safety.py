"""The known-safe command classifier, rule by rule.

Each case is ``(argv, expected)``; the id says what the case is about. Shell
scripts are written as ``bash -lc`` unless the wrapper itself is under test.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codexcore.tools.safety import is_known_safe_command


def _case(name: str, argv: list[str], expected: bool) -> object:
    return pytest.param(argv, expected, id=name)


def _script(name: str, script: str, expected: bool) -> object:
    return pytest.param(["bash", "-lc", script], expected, id=f"bash-lc: {name}")


PLAIN_COMMANDS = [
    _case("ls", ["ls", "-la", "src"], True),
    _case("cat", ["cat", "README.md"], True),
    _case("pwd", ["pwd"], True),
    _case("grep", ["grep", "-rn", "TODO", "."], True),
    _case("head", ["head", "-n", "20", "f"], True),
    _case("tail", ["tail", "-n", "20", "f"], True),
    _case("wc", ["wc", "-l", "f"], True),
    _case("echo", ["echo", "hi"], True),
    _case("true", ["true"], True),
    _case("false", ["false"], True),
    _case("which", ["which", "python3"], True),
    _case("whoami", ["whoami"], True),
    _case("nl", ["nl", "-ba", "f"], True),
    _case("cut", ["cut", "-d:", "-f1", "/etc/passwd"], True),
    _case("tr", ["tr", "a-z", "A-Z"], True),
    _case("stat", ["stat", "f"], True),
    _case("file", ["file", "f"], True),
    _case("file -C compiles a magic file", ["file", "-C", "-m", "magic"], False),
    _case("file --compile", ["file", "--compile", "-m", "magic"], False),
]

RG = [
    _case("rg", ["rg", "-n", "TODO", "src"], True),
    _case("rg --pre-glob alone is harmless", ["rg", "--pre-glob", "*.gz", "x"], True),
    _case("rg --pre runs a program", ["rg", "--pre", "x", "pattern"], False),
    _case("rg --pre=", ["rg", "--pre=./evil", "pattern"], False),
    _case("rg --search-zip", ["rg", "--search-zip", "pattern"], False),
    _case("rg -z", ["rg", "-z", "pattern"], False),
    _case("rg -z in a cluster", ["rg", "-inz", "pattern"], False),
    _case("rg --hostname-bin runs a program", ["rg", "--hostname-bin=x", "p"], False),
    _case("rg pattern after -- is not an option", ["rg", "--", "--pre"], True),
]

SORT_UNIQ = [
    _case("sort", ["sort", "-u", "f"], True),
    _case("sort -k", ["sort", "-k", "2", "-t", ",", "f"], True),
    _case("sort -t takes 'o' as separator", ["sort", "-to", "f"], True),
    _case("sort -o", ["sort", "-o", "out", "f"], False),
    _case("sort -o after the operand", ["sort", "f", "-o", "out"], False),
    _case("sort -o in a cluster", ["sort", "-ruo", "out", "f"], False),
    _case("sort -oout", ["sort", "-oout", "f"], False),
    _case("sort --output", ["sort", "--output=out", "f"], False),
    _case("sort --output abbreviated", ["sort", "--out=out", "f"], False),
    _case("sort --compress-program", ["sort", "--compress-program=sh", "f"], False),
    _case("sort -- -o is a file name", ["sort", "--", "-o"], True),
    _case("uniq", ["uniq", "-c", "f"], True),
    _case("uniq -f N", ["uniq", "-f", "1", "f"], True),
    _case("uniq from stdin", ["uniq"], True),
    _case("uniq OUTPUT operand writes", ["uniq", "in", "out"], False),
    _case("uniq OUTPUT after options", ["uniq", "-s", "2", "in", "out"], False),
]

DATE = [
    _case("date", ["date"], True),
    _case("date +format", ["date", "-u", "+%Y-%m-%d"], True),
    _case("date -d", ["date", "-d", "yesterday", "+%s"], True),
    _case("date -Iseconds", ["date", "-Iseconds"], True),
    _case("date -s", ["date", "-s", "2020-01-01"], False),
    _case("date -s in a cluster", ["date", "-us", "2020-01-01"], False),
    _case("date --set", ["date", "--set=2020-01-01"], False),
    _case("date --set abbreviated", ["date", "--se", "2020-01-01"], False),
    _case("date MMDDhhmm operand sets the clock", ["date", "01010000"], False),
]

FIND = [
    _case("find", ["find", ".", "-name", "*.py", "-type", "f"], True),
    _case("find -print0", ["find", ".", "-print0"], True),
    _case("find -delete", ["find", ".", "-delete"], False),
    _case("find -exec", ["find", ".", "-exec", "rm", "{}", ";"], False),
    _case("find -execdir", ["find", ".", "-execdir", "rm", "{}", "+"], False),
    _case("find -ok", ["find", ".", "-ok", "rm", "{}", ";"], False),
    _case("find -okdir", ["find", ".", "-okdir", "rm", "{}", ";"], False),
    _case("find -fprint", ["find", ".", "-fprint", "out"], False),
    _case("find -fprint0", ["find", ".", "-fprint0", "out"], False),
    _case("find -fprintf", ["find", ".", "-fprintf", "out", "%p"], False),
    _case("find -fls", ["find", ".", "-fls", "out"], False),
]

SED = [
    _case("sed -n Np", ["sed", "-n", "10p", "f"], True),
    _case("sed -n M,Np", ["sed", "-n", "1,5p", "f"], True),
    _case("sed -n M,$p", ["sed", "-n", "5,$p", "f", "g"], True),
    _case("sed -n from stdin", ["sed", "-n", "1p"], True),
    _case("sed -i", ["sed", "-i", "s/a/b/", "f"], False),
    _case("sed -i hidden after files", ["sed", "-n", "1p", "f", "-i"], False),
    _case("sed substitution", ["sed", "s/a/b/", "f"], False),
    _case("sed -n with a w command", ["sed", "-n", "1w out", "f"], False),
    _case("sed -n two commands", ["sed", "-n", "1p;2p", "f"], False),
    _case("sed without script", ["sed", "-n"], False),
]

GIT = [
    _case("git status", ["git", "status", "--short"], True),
    _case("git log", ["git", "log", "--oneline", "-n", "5"], True),
    _case("git diff", ["git", "diff", "--stat", "HEAD~1"], True),
    _case("git show", ["git", "show", "HEAD"], True),
    _case("git branch", ["git", "branch"], True),
    _case("git branch -a -v", ["git", "branch", "-a", "-v"], True),
    _case("git branch -av", ["git", "branch", "-av"], True),
    _case("git branch --list", ["git", "branch", "--list"], True),
    _case("git branch --show-current", ["git", "branch", "--show-current"], True),
    _case("git --no-pager log", ["git", "--no-pager", "log"], True),
    _case("git -C dir status", ["git", "-C", "sub", "status"], True),
    _case("git commit", ["git", "commit", "-m", "x"], False),
    _case("git push", ["git", "push"], False),
    _case("git checkout", ["git", "checkout", "main"], False),
    _case("git branch -D", ["git", "branch", "-D", "x"], False),
    _case("git branch creates", ["git", "branch", "new-branch"], False),
    _case("git branch -m", ["git", "branch", "-m", "a", "b"], False),
    _case("git -c config override", ["git", "-c", "core.pager=x", "log"], False),
    _case("git --config-env", ["git", "--config-env=core.pager=X", "log"], False),
    _case("git --exec-path", ["git", "--exec-path=/tmp", "status"], False),
    _case("git diff --output", ["git", "diff", "--output=out"], False),
    _case("git diff --output separate", ["git", "diff", "--output", "out"], False),
    _case("git log --output abbreviated", ["git", "log", "-p", "--outp=out"], False),
    _case("git show --output", ["git", "show", "--output=out"], False),
    _case("git diff --ext-diff", ["git", "diff", "--ext-diff"], False),
    _case("git alone", ["git"], False),
    _case("git -C without subcommand", ["git", "-C", "dir"], False),
]

PATHS = [
    _case("/bin/ls is ls", ["/bin/ls", "-l"], True),
    _case("/usr/bin/git is git", ["/usr/bin/git", "status"], True),
    _case("relative path could be anything", ["./ls"], False),
    _case("untrusted directory", ["/tmp/ls"], False),
    _case("path in a trusted directory is still checked", ["/bin/rm", "-rf", "x"], False),
]

UNKNOWN = [
    _case("empty argv", [], False),
    _case("empty command name", [""], False),
    _case("python3", ["python3", "-c", "print(1)"], False),
    _case("rm", ["rm", "-rf", "x"], False),
    _case("curl", ["curl", "https://example.com"], False),
    _case("tee", ["tee", "out"], False),
    _case("xargs", ["xargs", "rm"], False),
]

SHELL_WRAPPERS = [
    _case("bash -lc", ["bash", "-lc", "ls"], True),
    _case("bash -c", ["bash", "-c", "ls"], True),
    _case("sh -c", ["sh", "-c", "ls"], True),
    _case("zsh -lc", ["zsh", "-lc", "ls"], True),
    _case("/bin/bash -lc", ["/bin/bash", "-lc", "ls"], True),
    _case("bash with extra positional args", ["bash", "-lc", "ls", "x"], False),
    _case("bash -x -c", ["bash", "-x", "-c", "ls"], False),
    _case("bash running a script file", ["bash", "script.sh"], False),
    _case("bash without script", ["bash", "-lc"], False),
    _case("unsafe command in script", ["sh", "-c", "rm -rf x"], False),
]

SCRIPTS = [
    # Safe compositions.
    _script("pipe", "ls | wc -l", True),
    _script("semicolon", "ls; echo hi", True),
    _script("and-or", "ls && pwd || echo failed", True),
    _script("newlines", "ls\npwd\n", True),
    _script("continued after &&", "ls &&\n  pwd", True),
    _script("trailing semicolon", "ls;", True),
    _script("quoted args", "grep -n 'a b' \"c d\"", True),
    _script("quoted operators are words", "echo '&&' ';' '|' '>' '$(x)'", True),
    _script("escaped dollar", r"echo \$HOME", True),
    _script("escaped in double quotes", r'echo "a \"b\" \$c"', True),
    _script("glob for any-args command", "ls *.py && cat src/*.txt", True),
    _script("quoted glob for find", "find . -name '*.py'", True),
    _script("sed print", "sed -n 1,5p f", True),
    _script("git log piped", "git log --oneline | head -n 5", True),
    _script("nested shell", "bash -c 'ls | wc -l'", True),
    _script("hash inside a word", "echo a#b", True),
    # Unsafe commands inside.
    _script("rm after &&", "ls && rm -rf x", False),
    _script("rm after ;", "ls; rm -rf x", False),
    _script("rm after newline", "ls\nrm -rf x", False),
    _script("pipe into sh", "echo ls | sh", False),
    _script("find -delete", "find . -delete", False),
    _script("nested unsafe shell", "bash -c 'rm x'", False),
    # Syntax outside the subset.
    _script("redirect >", "ls > out", False),
    _script("redirect >>", "ls >> out", False),
    _script("redirect <", "cat < f", False),
    _script("heredoc", "cat <<EOF\nhi\nEOF", False),
    _script("redirect 2>", "ls 2>/dev/null", False),
    _script("redirect &>", "ls &> out", False),
    _script("pipe stderr |&", "ls |& wc", False),
    _script("command substitution", "cat $(whoami)", False),
    _script("command substitution in double quotes", 'echo "$(id)"', False),
    _script("backticks", "echo `id`", False),
    _script("backticks in double quotes", 'echo "`id`"', False),
    _script("process substitution", "cat <(ls)", False),
    _script("variable", "echo $HOME", False),
    _script("variable in double quotes", 'echo "$HOME"', False),
    _script("braced variable", "echo ${HOME}", False),
    _script("assignment prefix", "FOO=1 ls", False),
    _script("assignment alone", "FOO=1", False),
    _script("background", "ls &", False),
    _script("background then command", "sleep 1 & ls", False),
    _script("subshell", "(ls)", False),
    _script("group", "{ ls; }", False),
    _script("brace expansion builds a command", "{rm,-rf,x}", False),
    _script("comment", "ls # rm", False),
    _script("case terminator", "ls ;; ls", False),
    _script("unterminated single quote", "echo 'a", False),
    _script("unterminated double quote", 'echo "a', False),
    _script("trailing backslash", "ls \\", False),
    _script("empty script", "", False),
    _script("blank script", "  \n ", False),
    _script("dangling &&", "ls &&", False),
    _script("dangling pipe", "ls |", False),
    _script("leading operator", "&& ls", False),
    _script("empty command between operators", "ls && && pwd", False),
    _script("lone semicolon", ";", False),
    _script("negation", "! ls", False),
    _script("keyword", "if true; then ls; fi", False),
    _script("glob command name", "l? -la", False),
    _script("relative command", "./ls", False),
    # Unquoted globs could expand to file names that are options ("-delete", "-i").
    _script("glob argument for find", "find . *", False),
    _script("glob argument for sed", "sed -n 1p *", False),
    _script("glob argument for git", "git diff *.py", False),
    _script("glob argument for uniq", "uniq in*", False),
]


@pytest.mark.parametrize(
    ("argv", "expected"),
    PLAIN_COMMANDS + RG + SORT_UNIQ + DATE + FIND + SED + GIT + PATHS + UNKNOWN,
)
def test_commands(argv: list[str], expected: bool) -> None:
    assert is_known_safe_command(argv) is expected


@pytest.mark.parametrize(("argv", "expected"), SHELL_WRAPPERS + SCRIPTS)
def test_shell_scripts(argv: list[str], expected: bool) -> None:
    assert is_known_safe_command(argv) is expected


def test_accepts_any_sequence() -> None:
    assert is_known_safe_command(("ls", "-l"))


@given(script=st.text(alphabet=" \t\n'\"\\|&;<>()$`{}#*?[]=~!abc-", max_size=40))
def test_never_raises_on_arbitrary_scripts(script: str) -> None:
    is_known_safe_command(["bash", "-lc", script])


@given(argv=st.lists(st.text(max_size=10), max_size=6))
def test_never_raises_on_arbitrary_argv(argv: list[str]) -> None:
    is_known_safe_command(argv)
