"""Slack OAuth tables: slack_sdk's installations, bots and OAuth states, under migrations.

The tables, columns and indexes are those slack_sdk's SQLAlchemy stores define, except
that the token columns are wider: they hold sealed tokens, longer than the tokens. A
database where an older Cosigner let slack_sdk create the tables keeps them (their token
columns are widened on PostgreSQL; SQLite does not enforce lengths).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SEALED = sa.String(1000)
INSTALLATION_TOKENS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token")
BOT_TOKENS = ("bot_token", "bot_refresh_token")


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if inspector.has_table("slack_installations"):
        _widen("slack_installations", (*INSTALLATION_TOKENS, "incoming_webhook_url"))
    else:
        _installations()
    if inspector.has_table("slack_bots"):
        _widen("slack_bots", BOT_TOKENS)
    else:
        _bots()
    if not inspector.has_table("slack_oauth_states"):
        op.create_table(
            "slack_oauth_states",
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("state", sa.String(200), nullable=False),
            sa.Column("expire_at", sa.DateTime, nullable=False),
        )


def _widen(table: str, columns: tuple[str, ...]) -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for column in columns:
        op.alter_column(table, column, type_=SEALED, existing_type=sa.String(200))


def _installations() -> None:
    op.create_table(
        "slack_installations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("client_id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("enterprise_id", sa.String(32)),
        sa.Column("enterprise_name", sa.String(200)),
        sa.Column("enterprise_url", sa.String(200)),
        sa.Column("team_id", sa.String(32)),
        sa.Column("team_name", sa.String(200)),
        sa.Column("bot_token", SEALED),
        sa.Column("bot_id", sa.String(32)),
        sa.Column("bot_user_id", sa.String(32)),
        sa.Column("bot_scopes", sa.String(1000)),
        sa.Column("bot_refresh_token", SEALED),
        sa.Column("bot_token_expires_at", sa.DateTime),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("user_token", SEALED),
        sa.Column("user_scopes", sa.String(1000)),
        sa.Column("user_refresh_token", SEALED),
        sa.Column("user_token_expires_at", sa.DateTime),
        sa.Column("incoming_webhook_url", SEALED),
        sa.Column("incoming_webhook_channel", sa.String(200)),
        sa.Column("incoming_webhook_channel_id", sa.String(200)),
        sa.Column("incoming_webhook_configuration_url", sa.String(200)),
        sa.Column("is_enterprise_install", sa.Boolean, nullable=False),
        sa.Column("token_type", sa.String(32)),
        sa.Column("installed_at", sa.DateTime, nullable=False),
    )
    op.create_index(
        "slack_installations_idx",
        "slack_installations",
        ["client_id", "enterprise_id", "team_id", "user_id", "installed_at"],
    )


def _bots() -> None:
    op.create_table(
        "slack_bots",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("client_id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("enterprise_id", sa.String(32)),
        sa.Column("enterprise_name", sa.String(200)),
        sa.Column("team_id", sa.String(32)),
        sa.Column("team_name", sa.String(200)),
        sa.Column("bot_token", SEALED),
        sa.Column("bot_id", sa.String(32)),
        sa.Column("bot_user_id", sa.String(32)),
        sa.Column("bot_scopes", sa.String(1000)),
        sa.Column("bot_refresh_token", SEALED),
        sa.Column("bot_token_expires_at", sa.DateTime),
        sa.Column("is_enterprise_install", sa.Boolean, nullable=False),
        sa.Column("installed_at", sa.DateTime, nullable=False),
    )
    op.create_index("slack_bots_idx", "slack_bots", ["client_id", "enterprise_id", "team_id", "installed_at"])


def downgrade() -> None:
    for table in ("slack_oauth_states", "slack_bots", "slack_installations"):
        op.drop_table(table)
