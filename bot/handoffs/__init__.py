"""Handoffs: Done claimed once, then checked against the application's `expect` URL."""
