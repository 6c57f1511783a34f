"""Dead-letter queue tools: list, inspect, replay."""

from validation.dlq.messages import DeadLetter
from validation.dlq.tools import DeadLetterQueue, ReplayReport

__all__ = ["DeadLetter", "DeadLetterQueue", "ReplayReport"]
