"""PySpark jobs that turn event logs (real nodes or simulation) into a reliability report."""
