"""Fixtures of the fault tests (defined in fault_helpers.py)."""

from tests.fault.fault_helpers import start_executor

__all__ = ["start_executor"]
