"""Observability: structured logs, Prometheus metrics, traces and their exporter, and the
readable activity lines of `cosigner dev`.
"""
