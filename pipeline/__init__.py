"""PySpark jobs that turn event logs (real nodes or simulation) into a reliability report."""

from pipeline.errors import PipelineError

__all__ = ["PipelineError"]
