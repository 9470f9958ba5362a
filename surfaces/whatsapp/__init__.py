"""The WhatsApp surface: approvals sent through Twilio as Content API templates with
Approve / Deny quick replies, answered by a tap or by typing YES or NO as for SMS.

template.py  the template's variables, and the button payloads (approval + one-time nonce)
adapter.py   WhatsAppConfig and WhatsAppAdapter: delivery through the twilio client
webhook.py   the signed inbound webhook (taps, typed answers) and delivery statuses
"""

from surfaces.whatsapp.adapter import WhatsAppAdapter, WhatsAppConfig, WhatsAppConfigError

__all__ = ["WhatsAppAdapter", "WhatsAppConfig", "WhatsAppConfigError"]
