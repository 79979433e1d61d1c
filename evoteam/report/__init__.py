"""Run reports: what a run did, drawn (score against spend, team versions, per-workload speedups,
retrieval), as a self-contained HTML page, PNG files, or a live page on the knowledge server."""
