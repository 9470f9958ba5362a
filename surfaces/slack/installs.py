"""Multi-workspace installs: Bolt's OAuth flow over the stores it is given, refusing unknown orgs.

An install is stored only when the policy maps its workspace (or, for an org-wide install,
its Enterprise Grid org) to a tenant; otherwise the installer gets a page naming the id to
add to the policy. The stores are slack_sdk's abstract installation and OAuth-state stores;
`storage.slack_installs` keeps them in the database with every token sealed at rest.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from slack_bolt import BoltResponse
from slack_bolt.error import BoltError
from slack_bolt.oauth.async_callback_options import (
    AsyncCallbackOptions,
    AsyncFailureArgs,
    AsyncSuccessArgs,
)
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"

TenantLookup = Callable[[str], "str | None"]


class InstallRefused(BoltError):
    """The workspace or org installing the app is not mapped to any tenant."""

    def __init__(self, org: str | None) -> None:
        super().__init__(f"no tenant for Slack org {org}")
        self.org = org


class Installs:
    """The installation and OAuth-state stores on one database, and the flow that fills them."""

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        scopes: tuple[str, ...],
        store: AsyncInstallationStore,
        states: AsyncOAuthStateStore,
        tenant_for: TenantLookup,
    ) -> None:
        self.store = store
        self.states = states
        self.flow = TenantCheckedFlow(
            tenant_for=tenant_for,
            settings=AsyncOAuthSettings(
                client_id=client_id,
                client_secret=client_secret,
                scopes=list(scopes),
                installation_store=self.store,
                state_store=self.states,
                install_path=INSTALL_PATH,
                redirect_uri_path=REDIRECT_PATH,
                callback_options=AsyncCallbackOptions(success=_installed, failure=_failed),
            ),
        )

    async def find_bot(self, team_id: str | None, enterprise_id: str | None) -> Bot | None:
        """The bot installed in this workspace, or org-wide in its Enterprise Grid org."""
        bot = await self.store.async_find_bot(enterprise_id=enterprise_id, team_id=team_id)
        if bot is None and enterprise_id is not None:
            bot = await self.store.async_find_bot(
                enterprise_id=enterprise_id, team_id=None, is_enterprise_install=True
            )
        return bot


class TenantCheckedFlow(AsyncOAuthFlow):
    """Bolt's OAuth flow, storing an installation only for an org the policy knows."""

    def __init__(self, *, tenant_for: TenantLookup, settings: AsyncOAuthSettings) -> None:
        super().__init__(settings=settings)
        self._tenant_for = tenant_for

    async def store_installation(self, request: AsyncBoltRequest, installation: Installation) -> None:
        """Refuse with `InstallRefused` unless a tenant owns this workspace or org."""
        candidates = [installation.enterprise_id]
        if not installation.is_enterprise_install:
            candidates.insert(0, installation.team_id)
        if not any(org and self._tenant_for(org) for org in candidates):
            org = installation.enterprise_id if installation.is_enterprise_install else installation.team_id
            raise InstallRefused(org)
        await super().store_installation(request, installation)


async def _installed(args: AsyncSuccessArgs) -> BoltResponse:
    return _page(200, "Cosigner is installed", "Approval cards can now be posted in this workspace.")


async def _failed(args: AsyncFailureArgs) -> BoltResponse:
    if isinstance(args.error, InstallRefused):
        org = html.escape(args.error.org or "(unknown)")
        return _page(
            403,
            "This workspace is not set up for Cosigner",
            f"Slack workspace or org <code>{org}</code> does not belong to any tenant, so the "
            "install was not saved. Ask the Cosigner operator to add "
            f'<code>slack_team = "{org}"</code> (or <code>slack_enterprise</code>) to your '
            "tenant in the policy file, then install again.",
        )
    return await args.default.failure(args)


def _page(status: int, title: str, body_html: str) -> BoltResponse:
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><h1>{html.escape(title)}</h1><p>{body_html}</p></body></html>"
    )
    return BoltResponse(status=status, body=page, headers={"Content-Type": "text/html; charset=utf-8"})
