"""Apple sums over MCP tools, the task only in the reset metadata (test fixture)."""

from .models import AppleTask, task_for

__all__ = ["AppleTask", "task_for"]
