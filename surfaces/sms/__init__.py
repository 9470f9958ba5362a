"""The SMS surface: approvals texted through Twilio, answered with an exact YES or NO.

text.py      what is texted (request, outcome, help), within two GSM-7 segments
reply.py     what an inbound text means: an exact answer, or STOP/START/HELP
webhook.py   the signed inbound and status webhooks
adapter.py   SmsConfig and SmsAdapter: delivery through the twilio client
emulator.py  a Twilio Messages API on loopback, for `cosigner dev` and tests
caller.py    posts really signed Twilio webhooks to the bot
"""

from surfaces.sms.adapter import SmsAdapter, SmsConfig, SmsConfigError
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import SentText, TwilioEmulator

__all__ = [
    "SentText",
    "SmsAdapter",
    "SmsConfig",
    "SmsConfigError",
    "TwilioCaller",
    "TwilioEmulator",
]
