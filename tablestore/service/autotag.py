"""Automatic tags (Paimon's `tag.automatic-creation` = `process-time`): the service's `auto-tag` duty.

At the end of each period of `tag.creation-period` (`daily`, `hourly`, `two-hours`), by the service machine's clock
in its local time zone, and `tag.creation-delay` later, the duty tags the table's latest snapshot with the period's
name in Paimon's format (its TagPeriodHandler): the period's start as `yyyy-MM-dd` (daily) or `yyyy-MM-dd HH`
(hourly, two-hours), e.g. `2026-12-03` for the day that ended at midnight, `2026-12-03 10` for 10:00-11:00. It then
deletes the oldest automatic tags beyond `tag.num-retained-max`.

Rules:
1. An automatic tag is told apart by its name, as Paimon does: a tag whose name reads as a period start in the
   format of the table's `tag.creation-period` is automatic. (A tag made by hand with such a name counts as one, in
   Paimon too; any other name is never touched.)
2. The period due at `now` is the last one that ended at or before `now - delay`. It is tagged once: when an
   automatic tag of it, or of a later period, exists, nothing is done. A tag of its name made meanwhile by someone
   else (TagExistsError) is no error. So the duty is idempotent and needs no state of its own across restarts.
3. Periods missed while no service ran are not filled in: only the latest due period gets a tag (Paimon without
   `tag.automatic-completion`).
4. A table without a snapshot gets no tag, and nothing is committed to it (no empty snapshot is made to tag).
5. The tagged snapshot is the latest when the duty runs, as Paimon's process-time tag is the snapshot committed
   first after the period's end: it may hold commits made between the end (plus delay) and the duty's turn (the
   service's expiry interval, a minute by default).
6. Retention orders the automatic tags by the period they name, oldest first, and deletes those beyond the maximum
   with filestore.delete_tag (which deletes the files only their expired snapshot used); it runs at every turn, so
   a maximum lowered by ALTER applies at the next one.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass
from typing import Mapping

import catalog as _catalog
from filestore import FileStore, TagExistsError, TagNotFoundError, create_tag, delete_tag
from tablestore.table import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Period:
    """One `tag.creation-period`: its length and the format of its tags' names (Paimon's)."""

    name: str
    hours: int
    format: str
    """strftime format of a tag's name, from the period's start."""
    pattern: str
    """What a name in `format` looks like (rule 1)."""

    @property
    def length(self) -> dt.timedelta:
        return dt.timedelta(hours=self.hours)

    def start(self, time: dt.datetime) -> dt.datetime:
        """The start of the period `time` (local wall time) falls in."""
        if self.hours == 24:
            return dt.datetime(time.year, time.month, time.day)
        return time.replace(hour=time.hour - time.hour % self.hours, minute=0, second=0, microsecond=0)

    def tag_name(self, start: dt.datetime) -> str:
        return start.strftime(self.format)

    def time_of(self, tag_name: str) -> dt.datetime | None:
        """The period start an automatic tag's name reads as; None when it is not an automatic tag's name."""
        if not re.fullmatch(self.pattern, tag_name):
            return None
        try:
            return dt.datetime.strptime(tag_name, self.format)
        except ValueError:
            return None


_DAY, _HOUR = r"\d{4}-\d{2}-\d{2}", r"\d{4}-\d{2}-\d{2} \d{2}"
PERIODS: dict[str, Period] = {
    "daily": Period("daily", 24, "%Y-%m-%d", _DAY),
    "hourly": Period("hourly", 1, "%Y-%m-%d %H", _HOUR),
    "two-hours": Period("two-hours", 2, "%Y-%m-%d %H", _HOUR),
}
"""The `tag.creation-period` values (on-disk: the names they give tags)."""


@dataclass(frozen=True)
class AutoTagPolicy:
    """A table's automatic-tag options, typed."""

    period: Period
    delay: dt.timedelta = dt.timedelta(0)
    num_retained_max: int | None = None

    def due(self, now: dt.datetime) -> dt.datetime:
        """The start of the period due at `now` (rule 2): the last one ended at or before `now - delay`."""
        return self.period.start(now - self.delay) - self.period.length


def policy_of(table: str, options: Mapping[str, str]) -> AutoTagPolicy | None:
    """The table's automatic-tag policy; None when `tag.automatic-creation` is `none`. InvalidOptionError (naming the
    table and option) for a delay of a period or more."""
    typed = _catalog.TableOptions(options)
    if typed.get(_catalog.TAG_AUTOMATIC_CREATION) != "process-time":
        return None
    period = PERIODS[typed.get(_catalog.TAG_CREATION_PERIOD)]
    delay = dt.timedelta(milliseconds=typed.get(_catalog.TAG_CREATION_DELAY))
    if delay >= period.length:
        raise _catalog.InvalidOptionError(
            f"table {table!r}: option {_catalog.TAG_CREATION_DELAY.key!r} must be less than one "
            f"{_catalog.TAG_CREATION_PERIOD.key} ({period.name}: {period.hours} h), got {delay}")
    return AutoTagPolicy(period, delay, typed.get_optional(_catalog.TAG_NUM_RETAINED_MAX))


@dataclass(frozen=True)
class AutoTagResult:
    """What one turn did: the tag it made (None: none due, or no snapshot) and the automatic tags it deleted."""

    created: str | None
    deleted: tuple[str, ...] = ()


def auto_tag(store: FileStore, policy: AutoTagPolicy, now: dt.datetime | None = None) -> AutoTagResult:
    """One turn of the duty at `now` (local wall time, naive; default: the clock's): tag the due period (rules 2-5),
    then apply the retention (rule 6)."""
    now = dt.datetime.now() if now is None else now
    table = store.table_name
    auto = sorted((t, n) for n in store.tags.names() if (t := policy.period.time_of(n)) is not None)
    due = policy.due(now)
    created = None
    if (not auto or auto[-1][0] < due) and store.snapshots.latest_id() is not None:
        name = policy.period.tag_name(due)
        try:
            tag = create_tag(store, name, now_ms=int(now.timestamp() * 1000))
        except TagExistsError:
            log.info("table %s: automatic tag %s exists already", table, name)
        else:
            created = name
            log.info("table %s: automatic tag %s on snapshot %s", table, name, tag.snapshot.id)
        auto = sorted({*auto, (due, name)})
    deleted: list[str] = []
    if policy.num_retained_max is not None and len(auto) > policy.num_retained_max:
        for _, name in auto[:len(auto) - policy.num_retained_max]:
            try:
                delete_tag(store, name)
            except TagNotFoundError:
                continue   # deleted meanwhile (by hand)
            deleted.append(name)
        log.info("table %s: deleted automatic tags %s (%s kept at most: tag.num-retained-max)", table,
                 ", ".join(deleted), policy.num_retained_max)
    return AutoTagResult(created, tuple(deleted))


def run_auto_tag(name: str, store: FileStore, options: Mapping[str, str],
                 now: dt.datetime | None = None) -> AutoTagResult:
    """The duty: table `name`'s policy (its options, the service's overrides over them) applied at `now`."""
    policy = policy_of(name, options)
    return AutoTagResult(None) if policy is None else auto_tag(store, policy, now)


def auto_tag_duty(table: Table) -> None:
    """The duty on `table` as the service opened it (its store and options carry the service's overrides)."""
    run_auto_tag(table.name, table._store, table.options)
