"""Test support that runs inside a real server: the stepped clock. Never on in production."""
