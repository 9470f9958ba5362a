"""The policy: its TOML file (schema, validation, the one merge), the rules worked out from it,
and what it decides for a call (checks, redaction, routing, the decision, its tests and replay).
"""
