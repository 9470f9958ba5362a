"""The language every part of Cosigner speaks: wire models, closed sets, errors, ports.

Nothing here does I/O, and nothing here imports another Cosigner package.
"""

# The SDK package is loaded before any module here: its protocol module imports these
# models, and `contracts.operations` re-exports the SDK's, so loading them the other way
# round would meet a half-initialised module.
import cosigner as _sdk  # noqa: F401
