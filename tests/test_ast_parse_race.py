"""The test processes' guard against CPython 3.11's corrupting AST parses (tests/ast_parse_race.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ast_parse_race import PARSES_RACE

REPO = Path(__file__).resolve().parents[1]

# Parses a stdlib module over and over, ``sys.argv[3]`` threads at once, while each garbage collection runs Python
# code: on one thread that code parses a line itself (as a finalizer formatting a traceback does); on several it
# lets another thread in mid-parse. Prints how many parses failed with the SystemError; stops at the first
# round with a failure, so an unguarded interpreter answers within a fraction of a second.
RACE = """
import ast, gc, sys, threading
if sys.argv[1] == "guarded":
    from tests.ast_parse_race import guard_ast_parse
    guard_ast_parse()
rounds, threads = int(sys.argv[2]), int(sys.argv[3])
if threads == 1:
    gc.callbacks.append(lambda phase, info: ast.parse("x = f(a, b)[0]"))
else:
    gc.callbacks.append(lambda phase, info: sum(range(50)))
source = open(threading.__file__).read()
failures = []
def parse_repeatedly():
    for _ in range(4):
        try:
            ast.parse(source)
        except SystemError as error:
            failures.append(error)
for _ in range(rounds):
    running = [threading.Thread(target=parse_repeatedly) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    if failures:
        break
print(len(failures))
"""


def _failed_parses(mode: str, *, rounds: int, threads: int) -> int:
    done = subprocess.run([sys.executable, "-c", RACE, mode, str(rounds), str(threads)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not PARSES_RACE, reason="this interpreter's AST parses do not race (CPython >= 3.11.8)")
@pytest.mark.parametrize("threads", [1, 4], ids=["a-parse-inside-a-collection", "threads"])
def test_guarded_parses_do_not_corrupt_each_other_where_bare_ones_do(threads: int) -> None:
    assert ast.parse.__module__ == "tests.ast_parse_race", "tests/conftest.py did not install the guard"
    assert _failed_parses("bare", rounds=20, threads=threads) > 0, "no failure unguarded: the check proves nothing"
    assert _failed_parses("guarded", rounds=5, threads=threads) == 0
