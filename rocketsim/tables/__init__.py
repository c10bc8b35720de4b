"""The run's tables: their schemas and registry, the mergeable summaries, reconciliation and the
vectorised grouping they share.
"""
