"""Dead-letter queue tools: list, inspect, replay."""

from ops.dlq.messages import DeadLetter
from ops.dlq.tools import DeadLetterQueue, ReplayReport

__all__ = ["DeadLetter", "DeadLetterQueue", "ReplayReport"]
