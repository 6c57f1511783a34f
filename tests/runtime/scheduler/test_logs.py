"""JSON log lines carry job_id and other context."""

from __future__ import annotations

import json
import logging

from runtime.scheduler.logs import JsonFormatter


def test_a_job_log_line_is_one_json_object_with_the_job_id() -> None:
    record = logging.LogRecord("runtime.scheduler.processor", logging.INFO, __file__, 1, "result published: %s",
                               ("succeeded",), None)
    record.job_id = "job-7"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "result published: succeeded"
    assert line["job_id"] == "job-7" and line["severity"] == "INFO"
    assert "args" not in line and "msg" not in line
