"""Multi-workspace installs: Bolt's OAuth flow on Cosigner's database, refusing unknown orgs.

An install is stored only when the policy maps its workspace (or, for an org-wide install,
its Enterprise Grid org) to a tenant; otherwise the installer gets a page naming the id to
add to the policy. Installations live in slack_sdk's tables (`slack_bots`,
`slack_installations`, `slack_oauth_states`, created by Cosigner's migrations), with every
token sealed by `sealing.TokenSeal` before it is written and opened after it is read.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
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
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy.ext.asyncio import AsyncEngine

from contracts.errors import SurfaceUnavailable
from surfaces.slack.sealing import SealError, TokenSeal, is_sealed

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
STATE_SECONDS = 600

TenantLookup = Callable[[str], "str | None"]
# Every column of slack_sdk's rows that holds a credential.
BOT_SECRETS = ("bot_token", "bot_refresh_token")
INSTALLATION_SECRETS = (*BOT_SECRETS, "user_token", "user_refresh_token", "incoming_webhook_url")
Row = TypeVar("Row", Bot, Installation)


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
        engine: AsyncEngine,
        tenant_for: TenantLookup,
        token_secret: str,
    ) -> None:
        self.store = SealedInstallationStore(TokenSeal(token_secret), client_id=client_id, engine=engine)
        self.states = AsyncSQLAlchemyOAuthStateStore(expiration_seconds=STATE_SECONDS, engine=engine)
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

    async def start(self) -> None:
        """Seal any token an older version stored in plain text."""
        await self.store.seal_plaintext()

    async def find_bot(self, team_id: str | None, enterprise_id: str | None) -> Bot | None:
        """The bot installed in this workspace, or org-wide in its Enterprise Grid org."""
        try:
            bot = await self.store.async_find_bot(enterprise_id=enterprise_id, team_id=team_id)
            if bot is None and enterprise_id is not None:
                bot = await self.store.async_find_bot(
                    enterprise_id=enterprise_id, team_id=None, is_enterprise_install=True
                )
        except SealError as exc:
            raise SurfaceUnavailable(f"Slack installation for {enterprise_id or team_id}: {exc}") from None
        return bot


class SealedInstallationStore(AsyncSQLAlchemyInstallationStore):
    """slack_sdk's SQLAlchemy store, sealing every token on the way in and opening it on the way out."""

    def __init__(self, seal: TokenSeal, *, client_id: str, engine: AsyncEngine) -> None:
        super().__init__(client_id=client_id, engine=engine)
        self.seal = seal

    def _convert(self, row: Row, columns: tuple[str, ...], sealing: bool) -> Row:
        out = copy.copy(row)
        for column in columns:
            value = getattr(out, column, None)
            if value and sealing != is_sealed(value):
                context = _context(column, out.enterprise_id, out.team_id)
                setattr(
                    out, column, self.seal.seal(value, context) if sealing else self.seal.open(value, context)
                )
        return out

    async def async_save(self, installation: Installation) -> None:
        """Store an installation (and its bot) with sealed tokens."""
        await super().async_save(self._convert(installation, INSTALLATION_SECRETS, True))

    async def async_save_bot(self, bot: Bot) -> None:
        """Store a bot with sealed tokens."""
        await super().async_save_bot(self._convert(bot, BOT_SECRETS, True))

    async def async_find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        """The newest bot of a workspace or org, tokens opened."""
        bot = await super().async_find_bot(
            enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
        )
        return None if bot is None else self._convert(bot, BOT_SECRETS, False)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        """The newest installation of a workspace or org, tokens opened."""
        found = await super().async_find_installation(
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
            is_enterprise_install=is_enterprise_install,
        )
        # slack_sdk may have copied an (already opened) bot token in: only sealed ones change.
        return None if found is None else self._convert(found, INSTALLATION_SECRETS, False)

    async def seal_plaintext(self) -> int:
        """Seal in place every token stored in plain text; return how many were sealed."""
        sealed = 0
        async with self.engine.begin() as conn:
            for table, columns in ((self.installations, INSTALLATION_SECRETS), (self.bots, BOT_SECRETS)):
                rows = (await conn.execute(sa.select(table))).mappings().all()
                for row in rows:
                    changes = _sealed_changes(self.seal, row, columns)
                    if changes:
                        await conn.execute(table.update().where(table.c.id == row["id"]).values(**changes))
                        sealed += len(changes)
        return sealed


def _context(column: str, enterprise_id: str | None, team_id: str | None) -> str:
    return f"{column}|{enterprise_id or ''}|{team_id or ''}"


def _sealed_changes(seal: TokenSeal, row: Any, columns: tuple[str, ...]) -> dict[str, str]:
    return {
        column: seal.seal(row[column], _context(column, row["enterprise_id"], row["team_id"]))
        for column in columns
        if row[column] and not is_sealed(row[column])
    }


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
