"""Errors of every package: they cross process boundaries intact."""
from __future__ import annotations


def test_errors_survive_pickling_across_processes() -> None:
    """Writer processes and Spark workers send errors back pickled: each arrives as itself, message and fields."""
    import pickle

    import filestore
    import logstore
    import tablestore
    from tablestore.errors import ChangesExpiredError, CompactionError

    errors: list[BaseException] = [
        filestore.SequenceConflictError("db.t", ["a:0"]), filestore.CommitConflictError("db.t", ["f1"]),
        filestore.TableDroppedError("db.t", "/wh/db.db/t", recreated=True), filestore.CorruptFileError("/x", "bad"),
        logstore.LogFormatError("bad", topic="t", partition=1, offset=5),
        logstore.InvalidRowKindError("bad kind", table="db.t", kinds=["X"], count=2),
        tablestore.InvalidRowKindError("X", "db.t"), CompactionError("db.t", 4, OSError("disk full")),
        ChangesExpiredError("db.t", 1, None, 7, offset=120), logstore.LogRecordsExpiredError("topic", 1, 5, 9),
    ]
    for e in errors:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.__dict__ == e.__dict__
