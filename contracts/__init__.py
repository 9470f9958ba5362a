"""The language every part of Cosigner speaks: wire models, closed sets, errors, ports.

The wire models, answers, closed sets, names, errors, digest and grant checks are defined
in the agent SDK (`cosigner`) and re-exported here under the server's names; the ports and
PolicyError are the server's own. Nothing here does I/O, and nothing here imports another
of the server's packages.
"""
