"""Dead-letter queue tools: list, inspect, replay."""

from runtime.dlq.messages import DeadLetter
from runtime.dlq.tools import DeadLetterQueue, ReplayReport

__all__ = ["DeadLetter", "DeadLetterQueue", "ReplayReport"]
