"""The Teams surface: approvals as Adaptive Cards in Microsoft Teams, answered by `Action.Execute`.

card.py      the Adaptive Card: pending (Approve / Deny, a comment), closed, invoke answers
auth.py      the Bot Connector's JWT checked in full, and our app token for outbound calls
certificate.py  the app's client certificate: the signed assertion used instead of a password
activity.py  what an inbound activity means: a card action parsed into a `Click`
adapter.py   TeamsConfig and TeamsAdapter: `POST /teams/messages`, delivery and card updates
emulator.py  a Bot Connector and Entra ID on loopback, for `cosigner dev` and tests (not imported here)
"""

from surfaces.teams.adapter import TeamsAdapter, TeamsConfig, TeamsConfigError
from surfaces.teams.certificate import CertificateError, ClientCertificate

__all__ = ["CertificateError", "ClientCertificate", "TeamsAdapter", "TeamsConfig", "TeamsConfigError"]
