"""Sums to answer, with OpenEnv's Task API: a test fixture (see server/environment.py)."""
