"""A generated "shop" database's `orders` table as Debezium would capture it: the change events (Kafka key and
value, Debezium JSON with the Kafka Connect `schema`/`payload` wrapper, as a MySQL or PostgreSQL connector writes
them) and the table's true state after them. The demo (`tablestore demo`), the ingest benchmark and the tests play
it into a topic and check a managed table against `truth`.

Columns: order_id BIGINT (the key), customer_id INT, status STRING, amount DECIMAL(10,2) (Debezium's precise mode:
base64 bytes), created_at and updated_at (io.debezium.time.MicroTimestamp; updated_at is when the event was made,
so a reader downstream can tell how old a change is); after `add_coupon()` the source table has a new
column `coupon` STRING, as after an ALTER TABLE in the source database; after `widen_customer()` customer_id is a
BIGINT (declared int64) and new customers' ids no longer fit an INT. Events: inserts (`c`), updates (`u` with
before and after), deletes (`d`, then a tombstone), and primary-key changes (Debezium's `d` of the old key, its
tombstone, then `c` of the new key).
"""
from __future__ import annotations

import base64
import datetime as dt
import random
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterator

import orjson

TOPIC = "shop.public.orders"
Row = dict[str, Any]
EPOCH = dt.datetime(1970, 1, 1)


def _field(column: str, type_: str, optional: bool, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "optional": optional, "field": column, **extra}


def _value_schema(coupon: bool, wide: bool = False) -> dict[str, Any]:
    columns = [
        _field("order_id", "int64", False), _field("customer_id", "int64" if wide else "int32", True),
        _field("status", "string", True),
        _field("amount", "bytes", True, name="org.apache.kafka.connect.data.Decimal", version=1,
               parameters={"scale": "2", "connect.decimal.precision": "10"}),
        _field("created_at", "int64", True, name="io.debezium.time.MicroTimestamp", version=1),
        _field("updated_at", "int64", True, name="io.debezium.time.MicroTimestamp", version=1),
    ]
    if coupon:
        columns.append(_field("coupon", "string", True))
    row = {"type": "struct", "fields": columns, "optional": True, "name": "shop.public.orders.Value"}
    source = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "field": "source",
              "fields": [_field("connector", "string", False), _field("ts_ms", "int64", False),
                         _field("db", "string", False), _field("table", "string", False)]}
    return {"type": "struct", "optional": False, "name": "shop.public.orders.Envelope",
            "fields": [dict(row, field="before"), dict(row, field="after"), source,
                       _field("op", "string", False), _field("ts_ms", "int64", True)]}


_KEY_SCHEMA = {"type": "struct", "optional": False, "name": "shop.public.orders.Key",
               "fields": [_field("order_id", "int64", False)]}


def _now() -> dt.datetime:
    """The wall clock as the naive UTC datetime a MicroTimestamp column reads back as."""
    return EPOCH + dt.timedelta(microseconds=time.time_ns() // 1000)


def _decimal_bytes(value: Decimal) -> str:
    unscaled = int(value.scaleb(2))
    raw = unscaled.to_bytes((unscaled.bit_length() + 8) // 8 or 1, "big", signed=True)
    return base64.b64encode(raw).decode()


@dataclass
class ShopOrders:
    """The source table and its change stream. `events(n)` makes n change events (Kafka records); `truth` is the
    table after every event made so far."""

    keys: int = 1000
    update_ratio: float = 0.30
    delete_ratio: float = 0.05
    key_change_ratio: float = 0.0
    seed: int = 7
    truth: dict[int, Row] = field(default_factory=dict)
    coupon: bool = False
    wide: bool = False
    made: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._next_id = 1
        self._schemas = {(c, w): orjson.dumps(_value_schema(c, w)).decode() for c in (False, True)
                         for w in (False, True)}
        self._live: list[int] = []
        self._slot: dict[int, int] = {}

    def add_coupon(self) -> None:
        """The source database's ALTER TABLE orders ADD COLUMN coupon: later events carry it."""
        self.coupon = True

    def widen_customer(self) -> None:
        """The source database's ALTER TABLE orders ALTER customer_id TYPE BIGINT: later events declare int64, and
        new orders' customers have ids beyond an INT."""
        self.wide = True

    def _row(self, order_id: int) -> Row:
        rng = self._rng
        row: Row = {"order_id": order_id, "customer_id": rng.randrange(1, 200) + (2**31 if self.wide else 0),
                    "status": rng.choice(("new", "paid", "shipped", "delivered")),
                    "amount": Decimal(rng.randrange(100, 100000)) / 100,
                    "created_at": EPOCH + dt.timedelta(microseconds=rng.randrange(1_600_000_000_000_000,
                                                                                  1_700_000_000_000_000)),
                    "updated_at": _now()}
        if self.coupon:
            row["coupon"] = rng.choice((None, "WELCOME", "SPRING10"))
        return row

    def _wire(self, row: Row | None) -> dict[str, Any] | None:
        if row is None:
            return None
        out = dict(row)
        out["amount"] = None if row["amount"] is None else _decimal_bytes(row["amount"])
        out["created_at"] = (row["created_at"] - EPOCH) // dt.timedelta(microseconds=1)
        out["updated_at"] = (row["updated_at"] - EPOCH) // dt.timedelta(microseconds=1)
        if not self.coupon:
            out.pop("coupon", None)
        return out

    def _record(self, op: str, key: int, before: Row | None, after: Row | None) -> tuple[bytes, bytes]:
        now = int(time.time() * 1000)
        payload = {"before": self._wire(before), "after": self._wire(after),
                   "source": {"connector": "postgresql", "ts_ms": now, "db": "shop", "table": "orders"},
                   "op": op, "ts_ms": now}
        schema = self._schemas[(self.coupon, self.wide)].encode()
        value = b'{"schema":' + schema + b',"payload":' + orjson.dumps(payload) + b"}"
        return self.key(key), value

    @staticmethod
    def key(order_id: int) -> bytes:
        return orjson.dumps({"schema": _KEY_SCHEMA, "payload": {"order_id": order_id}})

    def _add(self, order_id: int) -> None:
        self._slot[order_id] = len(self._live)
        self._live.append(order_id)

    def _remove(self, order_id: int) -> None:
        i = self._slot.pop(order_id)
        last = self._live.pop()
        if last != order_id:
            self._live[i] = last
            self._slot[last] = i

    def events(self, n: int) -> Iterator[tuple[bytes, bytes | None]]:
        """n change events (a delete's tombstone comes with it and is not counted), updating `truth`: each an update
        (`update_ratio`), a delete (`delete_ratio`), a primary-key change (`key_change_ratio`) of a random live order,
        or else an insert of a new one; once `keys` orders are live an insert is an update instead."""
        rng = self._rng
        for _ in range(n):
            self.made += 1
            r = rng.random()
            live = self._live
            if live and (r < self.update_ratio or (len(live) >= self.keys and
                                                   r >= self.update_ratio + self.delete_ratio + self.key_change_ratio)):
                yield self._update(live[rng.randrange(len(live))])
            elif live and r < self.update_ratio + self.delete_ratio + self.key_change_ratio:
                order_id = live[rng.randrange(len(live))]
                yield from self._delete(order_id, move=r >= self.update_ratio + self.delete_ratio)
            else:
                order_id, self._next_id = self._next_id, self._next_id + 1
                row = self._row(order_id)
                self.truth[order_id] = row
                self._add(order_id)
                yield self._record("c", order_id, None, row)

    def _update(self, order_id: int) -> tuple[bytes, bytes]:
        rng = self._rng
        before = self.truth[order_id]
        after = dict(before, status=rng.choice(("paid", "shipped", "delivered", "returned")),
                     amount=Decimal(rng.randrange(100, 100000)) / 100, updated_at=_now())
        if self.coupon:
            after.setdefault("coupon", None)
        self.truth[order_id] = after
        return self._record("u", order_id, before, after)

    def _delete(self, order_id: int, move: bool) -> Iterator[tuple[bytes, bytes | None]]:
        """A delete and its tombstone; with `move`, a primary-key change: the row comes back under a new id."""
        before = self.truth.pop(order_id)
        self._remove(order_id)
        yield self._record("d", order_id, before, None)
        yield self.key(order_id), None
        if move:
            new_id, self._next_id = self._next_id, self._next_id + 1
            moved = dict(before, order_id=new_id, updated_at=_now())
            if self.coupon:
                moved.setdefault("coupon", None)
            self.truth[new_id] = moved
            self._add(new_id)
            yield self._record("c", new_id, None, moved)

    def expected_rows(self) -> list[Row]:
        """`truth` as rows of the managed table (order_id order; `coupon` None where the row never had one)."""
        rows = []
        for order_id in sorted(self.truth):
            row = dict(self.truth[order_id])
            if self.coupon:
                row.setdefault("coupon", None)
            rows.append(row)
        return rows

    def revenue_by_customer(self) -> dict[int, Decimal]:
        """The downstream aggregate the demo keeps: sum(amount) of the current orders per customer."""
        out: dict[int, Decimal] = {}
        for row in self.truth.values():
            out[row["customer_id"]] = out.get(row["customer_id"], Decimal(0)) + row["amount"]
        return out
