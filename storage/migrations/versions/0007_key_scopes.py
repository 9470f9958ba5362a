"""Tenant API keys become rows with a scope: `agent` or `approver`, many per tenant.

Each tenant's one key (`tenants.api_key_hash`) moves to `api_keys` as an `agent` key, so an
agent keeps working across the upgrade; approver keys are created with
`cosigner tenants key create TENANT --scope approver`.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    keys = op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(80), nullable=False, unique=True),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])
    conn = op.get_bind()
    old = conn.execute(sa.text("SELECT name, api_key_hash, created_at FROM tenants")).all()
    if old:
        op.bulk_insert(
            keys,
            [
                {
                    "id": f"key_{secrets.token_hex(6)}",
                    "tenant": name,
                    "scope": "agent",
                    "key_hash": key_hash,
                    "created_at": created_at,
                }
                for name, key_hash, created_at in old
            ],
        )
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("api_key_hash")


def downgrade() -> None:
    # The older schema holds one key per tenant: its oldest agent key survives; a tenant
    # with none gets an unusable placeholder (a hash of nothing anyone holds).
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("api_key_hash", sa.String(80)))
    conn = op.get_bind()
    for (name,) in conn.execute(sa.text("SELECT name FROM tenants")).all():
        kept = conn.execute(
            sa.text(
                "SELECT key_hash FROM api_keys WHERE tenant = :t AND scope = 'agent' "
                "ORDER BY created_at LIMIT 1"
            ),
            {"t": name},
        ).scalar_one_or_none()
        conn.execute(
            sa.text("UPDATE tenants SET api_key_hash = :h WHERE name = :t"),
            {"h": kept or f"revoked-{secrets.token_hex(16)}", "t": name},
        )
    with op.batch_alter_table("tenants") as batch:
        batch.alter_column("api_key_hash", existing_type=sa.String(80), nullable=False)
        batch.create_unique_constraint("uq_tenants_api_key_hash", ["api_key_hash"])
    op.drop_table("api_keys")
