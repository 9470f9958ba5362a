"""`cosigner dev`: the sandbox (emulated Slack, Twilio and Teams), its page and its sample policy.
Never loaded by the serving path (an import-linter contract says so).
"""
