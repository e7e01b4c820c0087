"""The SQL side of `tablestore demo` (tablestore/demo_postgres.py): a small shop in a real PostgreSQL database, its
first rows, the transactions played against it while the demo runs, and what Postgres answers as the oracle.

Tables (the first rows exist before Debezium's connector starts: its snapshot reads them as `op: r`):

    customers(id int PK, name text, email varchar(100), vip boolean, note text, created_at timestamptz)
    products(id int PK, name text, price numeric(10,2), tags text[])
    orders(id bigint PK, customer_id int, product_id int, qty int, amount numeric(12,2), status text,
           updated_at timestamp(6))

Invariants:
1. `customers.note` is 4 KB of incompressible text (128 md5s) stored EXTERNAL, so PostgreSQL keeps it out of line
   (TOAST): an UPDATE that leaves it alone (the vip flips) sends Debezium's placeholder for it, never its value.
2. Every change of an order sets `updated_at = clock_timestamp()` (UTC: the session's time zone), so an order's
   version is (id, updated_at) and its age is measurable downstream.
3. One connection, one transaction at a time (autocommit off); a failed statement fails the workload (the demo
   then fails): nothing is retried, so the database holds exactly what the counts say was committed.
4. Half way (`evolve`): `ALTER TABLE orders ADD COLUMN coupon text` (later orders set it), then a new table
   `reviews(id int PK, order_id bigint, stars int, body text)`, with inserts from then on.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tablestore.errors import TableStoreError

CUSTOMER_ROWS, PRODUCT_ROWS, ORDER_ROWS = 300, 50, 2000
NOTE = "(SELECT string_agg(md5({seed} || '-' || k), '') FROM generate_series(1, 128) k)"
"""SQL: 4,096 characters of hex digits, different for each seed: nothing for a compressor to find."""

SCHEMA = (
    "CREATE TABLE customers (id int PRIMARY KEY, name text, email varchar(100), vip boolean, note text, "
    "created_at timestamptz)",
    "ALTER TABLE customers ALTER COLUMN note SET STORAGE EXTERNAL",
    "CREATE TABLE products (id int PRIMARY KEY, name text, price numeric(10,2), tags text[])",
    "CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int, product_id int, qty int, amount numeric(12,2), "
    "status text, updated_at timestamp(6))",
)
FIRST_ROWS = (
    "SELECT setseed(0.42)",
    f"INSERT INTO customers SELECT g, 'customer ' || g, 'customer' || g || '@shop.example', g % 10 = 0, "
    f"{NOTE.format(seed='g')}, now() - g * interval '7 hours' FROM generate_series(1, {CUSTOMER_ROWS}) g",
    f"INSERT INTO products SELECT g, 'product ' || g, round((1 + random() * 99)::numeric, 2), "
    f"ARRAY['kind' || g % 5, 'colour' || g % 3] FROM generate_series(1, {PRODUCT_ROWS}) g",
    f"INSERT INTO orders SELECT o.id, o.customer_id, p.id, o.qty, p.price * o.qty, "
    f"(ARRAY['new', 'paid', 'shipped'])[1 + o.id % 3], clock_timestamp() FROM ("
    f"SELECT g AS id, 1 + floor(random() * {CUSTOMER_ROWS})::int AS customer_id, "
    f"1 + floor(random() * {PRODUCT_ROWS})::int AS product_id, 1 + floor(random() * 5)::int AS qty "
    f"FROM generate_series(1, {ORDER_ROWS}) g) o JOIN products p ON p.id = o.product_id",
)
EVOLVE = (
    "ALTER TABLE orders ADD COLUMN coupon text",
    "CREATE TABLE reviews (id int PRIMARY KEY, order_id bigint, stars int, body text)",
)

NEW_ORDER = ("INSERT INTO orders (id, customer_id, product_id, qty, amount, status, updated_at) "
             "SELECT %s, %s, p.id, %s, p.price * %s, 'new', clock_timestamp() FROM products p WHERE p.id = %s")
NEW_ORDER_COUPON = ("INSERT INTO orders (id, customer_id, product_id, qty, amount, status, updated_at, coupon) "
                    "SELECT %s, %s, p.id, %s, p.price * %s, 'new', clock_timestamp(), %s FROM products p "
                    "WHERE p.id = %s")
UPDATE_ORDER = ("UPDATE orders o SET status = %s, qty = %s, amount = p.price * %s, updated_at = clock_timestamp() "
                "FROM products p WHERE o.id = %s AND p.id = o.product_id")
DELETE_ORDER = "DELETE FROM orders WHERE id = %s"
FLIP_VIP = "UPDATE customers SET vip = NOT vip WHERE id = %s"
NEW_CUSTOMER = (f"INSERT INTO customers VALUES (%s, %s, %s, false, {NOTE.format(seed='%s::text')}, "
                "clock_timestamp())")
NEW_PRICE = ("UPDATE products SET price = round(price * %s, 2), "
             "tags = CASE WHEN %s THEN array_append(tags, 'sale') ELSE tags END WHERE id = %s")
NEW_REVIEW = "INSERT INTO reviews VALUES (%s, %s, %s, %s)"
STATUSES = ("paid", "shipped", "delivered", "returned")

KINDS = ("new order", "order update", "order delete", "vip flip", "new customer", "price change", "review")
WEIGHTS = (50, 20, 8, 10, 3, 4, 0)
WEIGHTS_AFTER_DDL = (45, 18, 7, 10, 3, 4, 13)
"""How often each kind of statement is drawn; reviews only once their table exists."""


class WorkloadError(TableStoreError):
    """A statement of the demo's workload failed; names the kind of statement and PostgreSQL's first line."""


@dataclass
class WorkloadCounts:
    """What the workload committed (read by the status box and the report while it runs)."""

    transactions: int = 0
    statements: Counter[str] = field(default_factory=Counter)
    flipped: set[int] = field(default_factory=set)
    """Customers whose vip flag a committed transaction flipped (their TOASTed note left alone)."""
    ddl: list[str] = field(default_factory=list)
    started_at: float | None = None
    """Epoch seconds: when the first transaction began (older order versions are the first rows)."""
    seconds: float = 0.0
    done: bool = False


def connect(dsn: str, *, autocommit: bool = False) -> Any:
    """A psycopg connection in UTC (so `timestamp` values made by `clock_timestamp()` are UTC wall time)."""
    import psycopg

    return psycopg.connect(dsn, autocommit=autocommit, options="-c TimeZone=UTC", connect_timeout=10)


def create_shop(dsn: str) -> None:
    """The schema and the first rows, in one transaction."""
    with connect(dsn) as conn:
        for statement in (*SCHEMA, *FIRST_ROWS):
            conn.execute(statement)
        conn.commit()


class ShopWorkload:
    """The shop's transactions at a steady pace, each one to three statements drawn by `WEIGHTS`."""

    def __init__(self, dsn: str, *, seed: int = 7) -> None:
        self.dsn = dsn
        self.counts = WorkloadCounts()
        self._random = random.Random(seed)
        self._next_order = ORDER_ROWS + 1
        self._next_customer = CUSTOMER_ROWS + 1
        self._next_review = 1
        self._evolved = False

    def run(self, seconds: float, rate: int, stop: threading.Event) -> None:
        """`rate` transactions per second for `seconds` (fewer if PostgreSQL is slower), `evolve` half way; returns
        early when `stop` is set. Raises WorkloadError."""
        with connect(self.dsn) as conn:
            start = time.monotonic()
            self.counts.started_at = time.time()
            done = 0
            try:
                while not stop.is_set() and (now := time.monotonic()) - start < seconds:
                    if not self._evolved and now - start >= seconds / 2:
                        self._evolve(conn)
                    ahead = start + done / rate - now
                    if ahead > 0:
                        time.sleep(ahead)
                    self._transaction(conn)
                    done += 1
                    self.counts.transactions = done
            finally:
                self.counts.seconds = time.monotonic() - start
                self.counts.done = True

    def _evolve(self, conn: Any) -> None:
        for statement in EVOLVE:
            self._execute(conn, "schema change", statement, ())
            conn.commit()
            self.counts.ddl.append(statement)
        self._evolved = True

    def _transaction(self, conn: Any) -> None:
        weights = WEIGHTS_AFTER_DDL if self._evolved else WEIGHTS
        flipped: list[int] = []
        for kind in self._random.choices(KINDS, weights, k=self._random.randint(1, 3)):
            statement, params = self._statement(kind)
            self._execute(conn, kind, statement, params)
            if kind == "vip flip":
                flipped.append(int(params[0]))
        conn.commit()
        self.counts.flipped.update(flipped)

    def _statement(self, kind: str) -> tuple[str, tuple[Any, ...]]:
        r = self._random
        some_order = r.randrange(1, self._next_order)   # maybe deleted already: the statement changes nothing
        if kind == "new order":
            order, qty = self._next_order, r.randint(1, 5)
            self._next_order += 1
            customer, product = r.randrange(1, self._next_customer), r.randint(1, PRODUCT_ROWS)
            if self._evolved:
                coupon = r.choice((None, None, "WELCOME5", "SPRING10"))
                return NEW_ORDER_COUPON, (order, customer, qty, qty, coupon, product)
            return NEW_ORDER, (order, customer, qty, qty, product)
        if kind == "order update":
            qty = r.randint(1, 5)
            return UPDATE_ORDER, (r.choice(STATUSES), qty, qty, some_order)
        if kind == "order delete":
            return DELETE_ORDER, (some_order,)
        if kind == "vip flip":
            return FLIP_VIP, (r.randrange(1, self._next_customer),)
        if kind == "new customer":
            customer = self._next_customer
            self._next_customer += 1
            return NEW_CUSTOMER, (customer, f"customer {customer}", f"customer{customer}@shop.example",
                                  f"c{customer}")
        if kind == "price change":
            factor = Decimal(r.choice(("0.90", "0.95", "1.05", "1.10")))
            return NEW_PRICE, (factor, r.random() < 0.2, r.randint(1, PRODUCT_ROWS))
        review = self._next_review
        self._next_review += 1
        return NEW_REVIEW, (review, some_order, r.randint(1, 5), r.choice(("great", "fine", "late", "broken")))

    def _execute(self, conn: Any, kind: str, statement: str, params: tuple[Any, ...]) -> None:
        import psycopg

        try:
            conn.execute(statement, params)
        except psycopg.Error as e:
            conn.rollback()
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise WorkloadError(f"{kind} failed in PostgreSQL: {first}") from None
        self.counts.statements[kind] += 1


# -- the oracle ------------------------------------------------------------------------------------------------
def tables(conn: Any) -> list[str]:
    """The shop's tables, as PostgreSQL lists them."""
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def rows(conn: Any, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns of `table` and its rows (SELECT *), ordered by id."""
    from psycopg import sql

    cur = conn.execute(sql.SQL("SELECT * FROM {} ORDER BY id").format(sql.Identifier(table)))
    names = [d.name for d in cur.description or []]
    return names, [dict(zip(names, r)) for r in cur.fetchall()]


def revenue(conn: Any) -> dict[int, Decimal]:
    """Revenue per customer, as the downstream query must have it."""
    found = conn.execute("SELECT customer_id, sum(amount) FROM orders GROUP BY customer_id").fetchall()
    return {int(c): Decimal(s) for c, s in found if c is not None and s is not None}
