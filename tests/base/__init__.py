"""The ground modules (``promptflow_resume/base/``): YAML, redaction, durations, globs,
the collector, the schema quick check."""
