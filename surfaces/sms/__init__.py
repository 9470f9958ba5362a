"""The SMS surface: approvals texted through Twilio, answered with an exact YES or NO.

text.py      what is texted (request, outcome, help), within two GSM-7 segments
refused_text.py  the replies to a YES that cannot count (too long to text whole; bare, lately)
reply.py     what an inbound text means: an exact answer, or STOP/START/HELP
webhook.py   the signed inbound and status webhooks
adapter.py   SmsConfig and SmsAdapter: delivery through the twilio client
account.py   the account fetched with its credentials, to prove them (`cosigner doctor`)
emulator.py  a Twilio Messages API on loopback, for `cosigner dev` and tests (not imported here)
caller.py    posts really signed Twilio webhooks to the bot (not imported here)
"""

from surfaces.sms.adapter import SmsAdapter, SmsConfig, SmsConfigError

__all__ = ["SmsAdapter", "SmsConfig", "SmsConfigError"]
