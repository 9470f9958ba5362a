"""The language every part of Cosigner speaks: wire models, closed sets, errors, ports.

Nothing here does I/O, and nothing here imports another Cosigner package.
"""
