"""Slack installs in the database: slack_sdk's SQLAlchemy stores, with every token sealed at rest.

Installations live in slack_sdk's tables (`slack_bots`, `slack_installations`,
`slack_oauth_states`, created by Cosigner's migrations). Every token is sealed by
`sealing.TokenSeal` before it is written and opened after it is read; the Slack surface sees
only slack_sdk's abstract `AsyncInstallationStore` and `AsyncOAuthStateStore`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy.ext.asyncio import AsyncEngine

from contracts.errors import SurfaceUnavailable
from storage.database import Database
from storage.sealing import SealError, TokenSeal, is_sealed

STATE_SECONDS = 600
# Every column of slack_sdk's rows that holds a credential.
BOT_SECRETS = ("bot_token", "bot_refresh_token")
INSTALLATION_SECRETS = (*BOT_SECRETS, "user_token", "user_refresh_token", "incoming_webhook_url")
Row = TypeVar("Row", Bot, Installation)


@dataclass(frozen=True)
class SlackInstallStores:
    """The installation and OAuth-state stores of one Slack app on one database."""

    installations: SealedInstallationStore
    states: AsyncSQLAlchemyOAuthStateStore

    @classmethod
    def on(cls, db: Database, *, client_id: str, token_secret: str) -> SlackInstallStores:
        """Stores for the app `client_id`, sealing tokens with a key derived from `token_secret`."""
        engine = db._writer  # slack_sdk's stores run their own statements on storage's writer
        return cls(
            installations=SealedInstallationStore(
                TokenSeal(token_secret), client_id=client_id, engine=engine
            ),
            states=AsyncSQLAlchemyOAuthStateStore(expiration_seconds=STATE_SECONDS, engine=engine),
        )

    async def seal_plaintext(self) -> int:
        """Seal any token an older version stored in plain text; return how many were sealed."""
        return await self.installations.seal_plaintext()


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

    def _opened(self, row: Row, columns: tuple[str, ...]) -> Row:
        try:
            return self._convert(row, columns, False)
        except SealError as exc:
            raise SurfaceUnavailable(
                f"Slack installation for {row.enterprise_id or row.team_id}: {exc}"
            ) from None

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
        return None if bot is None else self._opened(bot, BOT_SECRETS)

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
        return None if found is None else self._opened(found, INSTALLATION_SECRETS)

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
