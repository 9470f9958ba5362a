"""`cosigner-hook`: the PreToolUse gate for coding agents (Claude Code, OpenAI Codex).

The agent runs `cosigner-hook claude-code` (or `codex`) before each tool call with the
hook's JSON on stdin; the command asks Cosigner with the session as the execution and the
tool use as the call, waits for the answer within `--timeout`, and prints the hook's JSON:
`allow` only for an approved call, `deny` for everything else (docs/coding-agents.md).

The modules, bottom up: `event` reads the hook's JSON (standard library only), `verdict`
words the answer, `settings` finds Cosigner's URL, key and surface, `asking` asks through
the SDK's client, and `command` is the command line that fails closed around them.
"""

from __future__ import annotations
