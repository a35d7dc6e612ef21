"""Which release migrated the store (`schema_upgrades`, from migration 0019), and the one line
that refuses a store a newer release migrated: both revisions, that release and the way back
to it. Read by every release from 0019 on, so what it reads of the table never changes.

Migrations are not expand-only (0018 rebuilt a key), so an older release does not run against
a newer schema: it refuses, and this says how to go back (docs/BEHAVIOUR.md, "Upgrades and
rollbacks").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from observer import __version__
from observer.storage.tables import schema_upgrades_table

# What the chart gives the container that migrates (helm/observer/templates/
# controller-deployment.yaml, from the pod's own labels and namespace): its Helm release.
HELM_RELEASE_ENV = "OBSERVER_HELM_RELEASE"
HELM_NAMESPACE_ENV = "OBSERVER_HELM_NAMESPACE"


@dataclass(frozen=True, slots=True)
class Installation:
    """The release that runs `db upgrade`: this package's version (`helm history` shows it as
    the APP VERSION) and, where the chart installed it, its Helm release and namespace (both
    or neither)."""

    version: str = __version__
    helm_release: str | None = None
    helm_namespace: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Installation:
        release = environ.get(HELM_RELEASE_ENV) or None
        namespace = environ.get(HELM_NAMESPACE_ENV) or None
        if release is None or namespace is None:
            # Half of it names no command that would work: recorded as no Helm at all.
            return cls()
        return cls(__version__, release, namespace)


@dataclass(frozen=True, slots=True)
class SchemaUpgrade:
    """One row: `installation` ran `db upgrade` at `at` and left the schema at `revision`."""

    at: datetime
    revision: str
    installation: Installation


def record_upgrade(
    connection: sa.Connection, at: datetime, revision: str, installation: Installation
) -> None:
    """A row for this release at `revision`, unless the newest row already says so: the
    controller's own upgrade at each start, after its init container's, adds nothing."""
    t = schema_upgrades_table
    newest = connection.execute(
        sa.select(t.c.version, t.c.revision).order_by(t.c.id.desc()).limit(1)
    ).first()
    if newest is not None and tuple(newest) == (installation.version, revision):
        return
    connection.execute(
        sa.insert(t).values(
            at=at,
            version=installation.version,
            revision=revision,
            helm_release=installation.helm_release,
            helm_namespace=installation.helm_namespace,
        )
    )


def last_upgrade(connection: sa.Connection, revision: str) -> SchemaUpgrade | None:
    """The newest row that left the schema at `revision`; None when there is none, or no
    table (a store migrated by hand, or by a branch this release never saw)."""
    if not sa.inspect(connection).has_table(schema_upgrades_table.name):
        return None
    t = schema_upgrades_table
    row = connection.execute(
        sa.select(t).where(t.c.revision == revision).order_by(t.c.id.desc()).limit(1)
    ).first()
    if row is None:
        return None
    return SchemaUpgrade(
        row.at,
        row.revision,
        Installation(row.version, row.helm_release, row.helm_namespace),
    )


def newer_schema_problem(where: str, current: str, head: str, by: SchemaUpgrade | None) -> str:
    """The refusal of a store at `current`, a revision this release (whose newest is `head`)
    does not know: what it is, who migrated it and the way back, in one line."""
    found = (
        f"{where} has schema revision {current}, newer than this observer's {head} "
        f"(release {__version__})"
    )
    backup = "or restore the database from a backup taken before that upgrade"
    if by is None:
        return (
            f"{found}, and no record of the release that migrated it: install that release "
            f"again, {backup}"
        )
    installed = by.installation
    migrated = f"observer {installed.version} migrated it on {by.at:%Y-%m-%d %H:%M} UTC"
    if installed.helm_release is None:
        return (
            f"{found}: {migrated}; go back to it: reinstall observer {installed.version}, {backup}"
        )
    release, namespace = installed.helm_release, f"--namespace {installed.helm_namespace}"
    return (
        f"{found}: {migrated} (Helm release {release}); go back to it: `helm rollback "
        f"{release} <REVISION> {namespace}`, REVISION the newest with APP VERSION "
        f"{installed.version} in `helm history {release} {namespace}`; {backup}"
    )
