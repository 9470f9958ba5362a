"""Names the API, the policy file and the tenant registry must agree on, defined once.

A policy section keyed by a name that one of these rules refuses could never match a
request, so the policy refuses it with the same rule the API and the CLI use.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,128}$"
TENANT_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
SLACK_ID_PATTERN = r"^[A-Z0-9]{1,64}$"
PHONE_PATTERN = r"^\+[1-9]\d{6,14}$"
AAD_ID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

ToolName = Annotated[str, Field(min_length=1, max_length=128, pattern=TOOL_NAME_PATTERN)]
"""A `toolName` as `POST /v1/approvals` accepts it."""

TenantName = Annotated[str, Field(min_length=1, max_length=63, pattern=TENANT_NAME_PATTERN)]
"""A tenant name as `cosigner tenants create` accepts it."""

SlackId = Annotated[str, Field(min_length=1, max_length=64, pattern=SLACK_ID_PATTERN)]
"""A Slack team, enterprise, channel or user id as Slack writes it (`T0ACME`, `U0ADMIN`)."""

PhoneNumber = Annotated[str, Field(pattern=PHONE_PATTERN)]
"""A phone number in E.164 form (`+15550000002`)."""

AadId = Annotated[str, Field(pattern=AAD_ID_PATTERN)]
"""A Microsoft Entra (Azure AD) tenant or object id: a GUID (`72f988bf-86f1-41af-91ab-2d7cd011db47`)."""
