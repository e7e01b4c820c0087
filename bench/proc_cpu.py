"""CPU seconds used by this process and its descendants (Spark's JVM, its Python workers, the catalog service), from
/proc (Linux; elsewhere 0.0). On a shared machine a run's wall time drifts with the others' load; its CPU time much
less, so the benches print both."""
from __future__ import annotations

import os


def tree_cpu_s(root: int | None = None, exclude: frozenset[int] = frozenset()) -> float:
    """user + system seconds of process `root` (default: this one) and every live descendant, plus their reaped
    children's; without the subtrees of the processes `exclude` (e.g. a Spark cluster this process started, whose
    executors are not the driver's)."""
    if not os.path.isdir("/proc"):
        return 0.0
    root = os.getpid() if root is None else root
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[1]: parent pid; [11:15]: utime, stime, cutime, cstime (clock ticks)
        children.setdefault(int(fields[1]), []).append((int(entry), sum(int(x) for x in fields[11:15])))
    total, todo = 0, [root]
    try:
        with open(f"/proc/{root}/stat", encoding="ascii", errors="replace") as f:
            total += sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:15])
    except OSError:
        return 0.0
    while todo:
        for pid, ticks in children.get(todo.pop(), []):
            if pid in exclude:
                continue
            total += ticks
            todo.append(pid)
    return total / os.sysconf("SC_CLK_TCK")
