"""Metrics, each checked in tests against a well-kept library or a hand-computed example."""
from .retrieval import accuracy, recall_at_k

__all__ = ["accuracy", "recall_at_k"]
