"""The root of every error :mod:`pipeline` raises: ``except pipeline.PipelineError``."""

from __future__ import annotations

__all__ = ["PipelineError"]


class PipelineError(Exception):
    """The report could not be made: bad input, Spark stopped, a report that failed."""
