"""Web Push: a waiting request told to the approvers' subscribed browsers (tool and tenant only).

sender.py  PushAdapter: RFC 8291 encryption and RFC 8292 VAPID (pywebpush, py_vapid), one POST
           per browser through the server's checked client; gone subscriptions removed
"""

from surfaces.push.sender import PushAdapter, PushConfig, payload

__all__ = ["PushAdapter", "PushConfig", "payload"]
