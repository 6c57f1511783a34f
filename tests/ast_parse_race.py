"""``ast.parse`` made safe in a test process on the Python 3.11 releases whose parses corrupt each other.

On CPython 3.11.0 to 3.11.7 the counter that guards the AST constructor's recursion is one per interpreter, not
one per call (https://github.com/python/cpython/issues/106905, fixed in 3.11.8 by
https://github.com/python/cpython/pull/113476). A parse that starts while another is building its Python AST
objects resets that counter, and the first ends with ``SystemError: AST constructor recursion depth mismatch``.
The second parse can come from another thread, let in when a garbage collection inside the first runs Python
code, or from the same thread, in that code itself: a finalizer that logs or reports an exception formats a
traceback, which on 3.11 parses the failing line to place its carets. In a test worker, pytest parses a test's
module to show a failure (an expected failure too) while clients and clusters the tests started are collected
around it: CI runs on 3.11.7 lost a worker to it twice (an INTERNALERROR, the whole run red), a lock against
other threads alone did not stop it. The images run 3.11.14, which has the fix.
"""

from __future__ import annotations

import ast
import gc
import sys
import threading
from typing import Any, Final

PARSES_RACE: Final = (3, 11) <= sys.version_info[:3] < (3, 11, 8)


def guard_ast_parse() -> None:
    """Make every ``ast.parse`` run alone: no garbage collection while it runs, so no finalizer or collection
    callback parses inside it on its own thread, and no Python code runs inside it to let another thread in; one
    process-wide lock around that, so a parse ending on one thread cannot turn collection back on while another
    is still parsing. The collector is left as it was found; what a parse leaves collectable is collected later.

    Every caller that matters here (pytest's source views, ``traceback``'s caret anchors, assertion rewriting)
    looks ``ast.parse`` up on the module when it calls, so replacing the attribute covers them."""
    original = ast.parse
    lock = threading.RLock()  # reentrant, should a signal handler parse on the thread that holds it

    def parse(*args: Any, **kwargs: Any) -> ast.AST:
        with lock:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return original(*args, **kwargs)
            finally:
                if collecting:
                    gc.enable()

    ast.parse = parse  # type: ignore[assignment]
