"""Helpers shared by the test files (imported as ``helpers.<module>``: pytest puts ``tests/`` on
the path)."""
