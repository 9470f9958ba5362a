"""The email surface: a request told by mail through the operator's SMTP server, answered in the inbox.

config.py   EmailConfig: COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM read and checked
message.py  the message: the call as a card shows it (text and HTML parts), one link to the inbox
adapter.py  EmailAdapter: one SMTP transaction per message (aiosmtplib), what the server said audited
"""

from surfaces.email.adapter import EmailAdapter
from surfaces.email.config import EmailConfig, EmailConfigError

__all__ = ["EmailAdapter", "EmailConfig", "EmailConfigError"]
