"""CPU seconds used by this process and its descendants (Spark's JVM, its Python workers, the catalog service), from
/proc (Linux; elsewhere 0.0). On a shared machine a run's wall time drifts with the others' load; its CPU time much
less, so the benches print both."""
from __future__ import annotations

import os
from typing import Callable


def _processes(commands: bool = False) -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, user + system clock ticks of it and its reaped children, its command line if asked)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            command = ""
            if commands:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # fields[1]: parent pid; [11:15]: utime, stime, cutime, cstime (clock ticks)
        out[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]), command)
    return out


def _tree(processes: dict[int, tuple[int, int, str]], root: int, exclude: frozenset[int]) -> list[int]:
    """`root` and its live descendants, without the subtrees of `exclude`."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    tree, todo = [root], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in exclude:
                tree.append(pid)
                todo.append(pid)
    return tree


def tree_cpu_s(root: int | None = None, exclude: frozenset[int] = frozenset()) -> float:
    """user + system seconds of process `root` (default: this one) and every live descendant, plus their reaped
    children's; without the subtrees of the processes `exclude` (e.g. a Spark cluster this process started, whose
    executors are not the driver's)."""
    return sum(_tree_cpu(None, root, exclude).values())


def tree_cpu_by_kind(kind: Callable[[str], str], root: int | None = None,
                     exclude: frozenset[int] = frozenset()) -> dict[str, float]:
    """`tree_cpu_s` split by `kind(command line)` of each process (a process's reaped children count as its own)."""
    return _tree_cpu(kind, root, exclude)


def _tree_cpu(kind: Callable[[str], str] | None, root: int | None, exclude: frozenset[int]) -> dict[str, float]:
    """Command lines are read only when `kind` needs them: timed runs measure around `tree_cpu_s`."""
    if not os.path.isdir("/proc"):
        return {}
    root = os.getpid() if root is None else root
    processes = _processes(commands=kind is not None)
    if root not in processes:
        return {}
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in _tree(processes, root, exclude):
        name = kind(processes[pid][2]) if kind is not None else "all"
        out[name] = out.get(name, 0.0) + processes[pid][1] / tick
    return out
