"""JSON log lines carry job_id and other context."""

from __future__ import annotations

import json
import logging
import os

from runtime.scheduler.logs import JsonFormatter


def test_a_job_log_line_is_one_json_object_with_the_job_id() -> None:
    record = logging.LogRecord("runtime.scheduler.processor", logging.INFO, __file__, 1, "result published: %s",
                               ("succeeded",), None)
    record.job_id = "job-7"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "result published: succeeded"
    assert line["job_id"] == "job-7" and line["severity"] == "INFO"
    assert "args" not in line and "msg" not in line


def test_a_log_file_is_kept_under_its_cap_with_its_newest_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A process of the local platform, its stderr appended to its log as `gpurt local up` starts it, logs far
    # more than its cap (a flood once wrote 44 MB in 96 s): the file stays under the cap and ends with the newest.
    import sys

    from runtime.local.processes import is_alive, start_process, wait_until

    cap = 64 * 1024
    script = ("import logging; from runtime.scheduler import logs; "
              f"logs.configure('INFO', {cap}); log = logging.getLogger('flood'); "
              "[log.warning('line %d %s', n, 'x' * 100) for n in range(5000)]")
    log_path = tmp_path / "scheduler.log"
    record = start_process("flooder", [sys.executable, "-c", script], {**os.environ}, log_path)
    assert wait_until(lambda: not is_alive(record), 60.0)
    lines = log_path.read_text().splitlines()
    assert log_path.stat().st_size <= cap + 1024  # a line past the cap at most
    assert "line 4999" in lines[-1]
    assert any("log cut at" in line for line in lines[:1])
    assert all(json.loads(line) for line in lines)  # whole JSON lines only


def test_a_stream_that_is_not_a_file_is_never_cut() -> None:
    from runtime.scheduler.logs import cap_file

    read, write = os.pipe()
    with os.fdopen(read, "rb"), os.fdopen(write, "w") as pipe:
        pipe.write("x" * 100)
        assert cap_file(pipe, 10) is False
