"""Scheduled audits of a lake (``jobs/audit.py``): figures over the tables, re-verification
of the archive, charts, a self-contained HTML report, ``summary.json`` and an exit status
for schedulers. It adds no rule of its own: verdicts come from :mod:`snap_spark.protocol`
through the batch job's own checker and replay fold.

Example (a SparkSession ``spark``)::

    from snap_spark.audit import audit
    result = audit(spark, "data/lake", "data/audit", reverify_fraction=0.05)
    result.alert, result.summary["figures"]["messages"]["rejected"]
"""

from snap_spark.audit.audit_job import DEFAULT_THRESHOLDS, METRICS, AuditResult, audit, main

__all__ = ["DEFAULT_THRESHOLDS", "METRICS", "AuditResult", "audit", "main"]
