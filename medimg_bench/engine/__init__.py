"""Evaluation engine: the loop, results and reports."""
