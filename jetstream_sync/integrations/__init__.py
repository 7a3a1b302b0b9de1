"""Framework glue: one home for everything that adapts the client to another framework's lifecycle.

``spark/`` (PySpark data source) today; Flask, Django, Celery and OpenTelemetry go beside it, sharing one
process-aware client cache (docs/ARCHITECTURE.md, "Where the next features go").
"""
