"""Changelogs for the change-stream tests and their oracle: seeded random commits of a primary-key table, and by a
dict replay the changes each commit makes at commit granularity (FLIP-188's full changelog, tablestore.log_changes).

Every commit holds: inserts of new keys, updates (-U old, +U new) of keys the table holds, some several times,
deletes (-D, some carrying the key only), a key inserted and deleted within the commit, a rewrite to an identical
row, and an update then a delete of one key."""
from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string()), pa.field("n", pa.int64())])
Row = tuple[int, str | None, int | None]
Record = tuple[str, Row]  # (row kind, row)
Change = tuple[str, int, str | None, int | None]


def random_commits(seed: int, count: int, state: Mapping[int, Row] | None = None,
                   size: int = 12) -> list[list[Record]]:
    """`count` commits of about `size` records each, over the keys of `state` (the table before them) and new ones."""
    rng = random.Random(seed)
    live = dict(state or {})
    next_key = max(live, default=0) + 1
    out: list[list[Record]] = []
    for c in range(count):
        records: list[Record] = []

        def new_row(key: int) -> Row:
            return key, f"{rng.choice('abc')}{c}" if rng.random() < 0.9 else None, rng.randrange(9)

        existing = sorted(live)  # keys the table holds before the commit
        rng.shuffle(existing)
        for _ in range(max(1, size // 3)):  # inserts, the first one updated in the same commit
            row = new_row(next_key)
            records.append(("+I", row))
            live[next_key] = row
            next_key += 1
        existing.append(next_key - 1)
        for key in existing[: max(1, size // 4)]:  # updates, some twice
            for _ in range(rng.choice([1, 1, 2])):
                row = new_row(key)
                records += [("-U", live[key]), ("+U", row)]
                live[key] = row
        for key in existing[max(1, size // 4): max(1, size // 4) + 2]:  # deletes, one by key only
            records.append(("-D", live.pop(key) if rng.random() < 0.5 else (key, None, None)))
            live.pop(key, None)
        ghost = (next_key, "ghost", 0)  # inserted and deleted within the commit: no snapshot shows it
        records += [("+I", ghost), ("-D", ghost)]
        next_key += 1
        same = [k for k in existing if k in live]
        if same:  # a rewrite to an identical row
            records += [("-U", live[same[0]]), ("+U", live[same[0]])]
        if len(same) > 1:  # an update then a delete of one key
            key = same[-1]
            changed = new_row(key)
            records += [("-U", live[key]), ("+U", changed), ("-D", changed)]
            live.pop(key)
        out.append(records)
    return out


def as_table(records: Sequence[Record]) -> pa.Table:
    """One commit's records as the changelog `Table.write` takes."""
    return pa.table({"_row_kind": pa.array([k for k, _ in records], pa.string()),
                     **{f.name: pa.array([r[i] for _, r in records], f.type) for i, f in enumerate(SCHEMA)}})


def replay(commits: Iterable[Sequence[Record]], state: Mapping[int, Row] | None = None
           ) -> tuple[list[Change], dict[int, Row]]:
    """The changes of `commits` applied to `state` (the table before them), commit by commit, and the state after:
    per commit a key's records collapse to its last one, compared with the key's row before the commit."""
    rows = dict(state or {})
    changes: list[Change] = []
    for records in commits:
        last: dict[int, Record] = {}
        for kind, row in records:
            last.pop(row[0], None)
            last[row[0]] = (kind, row)
        for key, (kind, row) in last.items():
            old = rows.get(key)
            if kind in ("+I", "+U"):
                if old is None:
                    changes.append(("+I", *row))
                elif old != row:
                    changes += [("-U", *old), ("+U", *row)]
                rows[key] = row
            elif old is not None:
                changes.append(("-D", *old))
                del rows[key]
    return changes, rows


def stored(commits: Iterable[Sequence[Record]], changelog_mode: str) -> list[Record]:
    """Every record the log stores, in order (an upsert-mode log stores no -U)."""
    return [(k, r) for records in commits for k, r in records if changelog_mode == "all" or k != "-U"]


def change_tuples(rows: Iterable[Mapping[str, Any]]) -> list[Change]:
    """`_row_kind` + SCHEMA rows (dicts, e.g. `to_pylist()` or Spark rows' `asDict()`) as change tuples."""
    return [(r["_row_kind"], r["id"], r["v"], r["n"]) for r in rows]


def per_key(changes: Iterable[Change]) -> dict[int, list[Change]]:
    """Each key's changes in order (a change stream orders a key's changes, not the keys)."""
    out: dict[int, list[Change]] = {}
    for change in changes:
        out.setdefault(change[1], []).append(change)
    return out


def ordered(changes: Iterable[Change]) -> list[Change]:
    """`changes` in one order whatever order they came in (nulls sort too), to compare streams as multisets."""
    return sorted(changes, key=repr)
