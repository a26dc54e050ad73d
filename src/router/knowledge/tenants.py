"""The tenant-id grammar: the one rule for what names a tenant, wherever a tenant is named.

Why one place: a document with ``tenant: X`` is only ever returned to a credential for ``X``
(docs/security.md), so the build (front matter ``tenant:``) and the credentials (``kr keys
create --tenant``) must agree on what an id is. Before this rule the build took any text
(``tenant: a b/../c``) and made a partition no key could name. The grammar is narrow on purpose:
lowercase (``Acme`` and ``acme`` are not two tenants that a typo can split), no spaces, dots or
slashes (an id is never read as a path), short enough for a log line — and it fits every tenant
in use (``construtora-alfa``, ``loja-oficial``, ``pro``).

Pure and dependency-free: the Worker, the build and the CLI all import it.
"""

from __future__ import annotations

import re

__all__ = ["TENANT_ID", "TENANT_ID_RULE", "is_tenant_id"]

TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""A tenant id, matched whole (``fullmatch``: a trailing newline is not part of an id)."""

TENANT_ID_RULE = (
    "a tenant id is 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit"
)
"""The grammar in words, for error messages."""


def is_tenant_id(value: object) -> bool:
    """Whether ``value`` is a tenant id (``"*"``, every tenant, is not one: it is the default
    of front matter, never a credential's tenant)."""
    return isinstance(value, str) and TENANT_ID.fullmatch(value) is not None
