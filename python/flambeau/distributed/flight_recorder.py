"""Reads the flight recorder dumps of every rank (`<comm>_rank<N>.json`, as the communicators
write them) and names what went wrong, per communicator: a rank that fell behind, a desync
(different ops, shapes or dtypes at one collective), a rank with no dump. Pure Python.

    python -m flambeau.distributed.flight_recorder DIR [--comm NAME] [--json]
"""
import argparse
import dataclasses
import json
import os
import sys

__all__ = ["DumpError", "Report", "load_dumps", "analyze", "analyze_all", "main"]

# Ops whose tensors have the same shape on every rank, and which tensor holds it; the other
# ops (all_to_all with splits, barrier, split) are compared by op and dtype only.
_SHAPE_FROM_INPUT = {"all_reduce", "all_gather", "all_gather_single", "reduce_scatter_single",
                     "broadcast", "reduce", "gather"}
_SHAPE_FROM_OUTPUT = {"reduce_scatter", "scatter"}


class DumpError(ValueError):
    """The directory holds no dumps, or a file is not a readable dump."""


@dataclasses.dataclass
class Report:
    """What analyze() found in one communicator. kind is "ok", "desync", "behind" or "missing"
    (the first problem by collective number; missing ranks are listed either way)."""
    comm: str
    kind: str = "ok"
    ranks: list = dataclasses.field(default_factory=list)  # global ranks with a dump
    ranks_behind: list = dataclasses.field(default_factory=list)
    ranks_missing: list = dataclasses.field(default_factory=list)
    seq: int = None  # the collective in question
    op: str = None  # its op ("all_reduce"), as most ranks ran it
    views: dict = dataclasses.field(default_factory=dict)  # rank -> its view of seq
    message: str = ""  # one or a few lines

    @property
    def ok(self):
        return self.kind == "ok"


def load_dumps(dir):
    """{comm name: {global rank: dump}} from the *.json files of dir; DumpError if there are
    none or one cannot be read."""
    if not os.path.isdir(dir):
        raise DumpError(f"{dir}: not a directory")
    names = sorted(n for n in os.listdir(dir) if n.endswith(".json"))
    if not names:
        raise DumpError(f"{dir}: no flight recorder dumps (*.json)")
    dumps = {}
    for name in names:
        path = os.path.join(dir, name)
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DumpError(f"{path}: cannot read it as JSON ({e})") from None
        if not isinstance(d, dict) or not all(k in d for k in ("rank", "pg_status", "entries")):
            raise DumpError(f"{path}: not a flight recorder dump (no rank, pg_status or entries)")
        if not isinstance(d["pg_status"], dict) or len(d["pg_status"]) != 1:
            raise DumpError(f"{path}: pg_status should name one communicator")
        comm = next(iter(d["pg_status"]))
        dumps.setdefault(comm, {})[int(d["rank"])] = d
    return dumps


def _op(entry):
    return entry["profiling_name"].rsplit(":", 1)[-1]


def _collectives(dump):
    """{collective seq: entry} of one dump (P2P ops left out)."""
    return {e["collective_seq_id"]: e for e in dump["entries"]
            if not e.get("is_p2p") and e.get("collective_seq_id", 0) > 0}


def _signature(entry):
    """What must agree across ranks at one collective: op, shape where defined, dtypes."""
    op = _op(entry)
    sizes = None
    if op in _SHAPE_FROM_INPUT and entry["input_sizes"]:
        sizes = entry["input_sizes"][0]
    elif op in _SHAPE_FROM_OUTPUT and entry["output_sizes"]:
        sizes = entry["output_sizes"][0]
    dtypes = sorted({t for t in entry["input_dtypes"] + entry["output_dtypes"] if t})
    return op, sizes, dtypes


def _describe(entry):
    """'all_reduce [4] float32' for a desync line."""
    op, sizes, dtypes = _signature(entry)
    text = op
    if sizes is not None:
        text += " [" + ", ".join(map(str, sizes)) + "]"
    elif entry["input_sizes"]:
        text += " in " + " ".join("[" + ", ".join(map(str, s)) + "]" for s in entry["input_sizes"])
    if dtypes:
        text += " " + "/".join(dtypes)
    return text


def _ranks(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _group(views):
    """Ranks grouped by equal view: [(ranks, view)], in rank order."""
    groups = {}
    for r in sorted(views):
        groups.setdefault(views[r], []).append(r)
    return [(rs, v) for v, rs in groups.items()]


def _first_desync(colls):
    """(seq, {rank: entry}) of the lowest collective where ranks disagree, or None."""
    seqs = sorted({s for c in colls.values() for s in c})
    for s in seqs:
        at = {r: c[s] for r, c in colls.items() if s in c}
        if len({json.dumps(_signature(e)) for e in at.values()}) > 1:
            return s, at
    return None


def _analyze_comm(comm, by_rank):
    rep = Report(comm=comm, ranks=sorted(by_rank))
    expected = set()
    for d in by_rank.values():
        expected.update(d.get("pg_config", {}).get(comm, {}).get("ranks", []))
    rep.ranks_missing = sorted(expected - set(by_rank))
    status = {r: d["pg_status"][comm] for r, d in by_rank.items()}
    colls = {r: _collectives(d) for r, d in by_rank.items()}
    lines = [f"no dump from rank {r} (dead or stuck?)" for r in rep.ranks_missing]
    if rep.ranks_missing:
        rep.kind = "missing"

    desync = _first_desync(colls)
    enqueued = {r: s["last_enqueued_collective"] for r, s in status.items()}
    low, high = min(enqueued.values()), max(enqueued.values())
    # The problem with the lowest collective number comes first.
    if desync and (low == high or desync[0] <= low):
        seq, at = desync
        rep.kind, rep.seq = "desync", seq
        rep.views = {r: _describe(e) for r, e in at.items()}
        groups = _group(rep.views)
        rep.op = _op(at[max(groups, key=lambda g: len(g[0]))[0][0]])
        lines.append(f"desync at collective #{seq}: " + "; ".join(
            f"{_ranks(rs)} ran {v}" for rs, v in groups))
    elif low < high:
        behind = sorted(r for r, n in enqueued.items() if n == low)
        rep.kind, rep.seq, rep.ranks_behind = "behind", low + 1, behind
        ahead = {r: colls[r].get(low + 1) for r in enqueued if r not in behind}
        rep.views = {r: f"#{low + 1} ({_op(e)}, {e['state']})" if e else f"#{low + 1} (not in its dump)"
                     for r, e in ahead.items()}
        ops = [_op(e) for e in ahead.values() if e]
        rep.op = max(sorted(set(ops)), key=ops.count) if ops else None
        last = [colls[r].get(low) for r in behind]
        if low == 0:
            mine = "it has run no collective"
        elif all(last) and len({(_op(e), e["state"]) for e in last}) == 1:
            mine = f"its last collective is #{low} ({_op(last[0])}, {last[0]['state']})"
        else:
            mine = f"its last collective is #{low}"
        subject = f"rank {behind[0]} is" if len(behind) == 1 else f"{_ranks(behind)} are"
        if len(behind) > 1:
            mine = mine.replace("its ", "their ").replace("it has", "they have")
        waits = ", ".join(f"{_ranks(rs)} {'wait' if len(rs) > 1 else 'waits'} in {v}"
                          for rs, v in _group(rep.views))
        lines.append(f"{subject} behind: {mine} while {waits}")
    elif not rep.ranks_missing:
        n = len(by_rank)
        rep.seq = high
        last = {r: colls[r].get(high) for r in by_rank}
        rep.op = _op(next(e for e in last.values() if e)) if any(last.values()) else None
        done = all(s["last_completed_collective"] == high for s in status.values())
        if high == 0:
            lines.append(f"no mismatch found: none of the {n} ranks ran a collective")
        elif done:
            lines.append(f"no mismatch found: all {n} ranks completed collective #{high}")
        else:
            states = {r: e["state"] if e else "not in its dump" for r, e in last.items()}
            rep.views = states
            lines.append(f"no mismatch found: all {n} ranks reached collective #{high} ({rep.op}); "
                         + ", ".join(f"{v} on {_ranks(rs)}" for rs, v in _group(states)))
    rep.message = "\n".join(f"communicator '{comm}': {line}" for line in lines)
    return rep


def analyze_all(dumps):
    """One Report per communicator of load_dumps()'s result, by name."""
    return [_analyze_comm(comm, dumps[comm]) for comm in sorted(dumps)]


def analyze(dumps, comm=None):
    """The Report of communicator `comm`; without it, of the only communicator, or else the
    first one (by name) with a problem."""
    if comm is not None:
        if comm not in dumps:
            raise DumpError(f"no dumps of communicator '{comm}' (found: {', '.join(sorted(dumps))})")
        return _analyze_comm(comm, dumps[comm])
    reports = analyze_all(dumps)
    return next((r for r in reports if not r.ok), reports[0])


def main(argv=None):
    """The command line: prints the findings; exit code 0 when none, 1 for a problem, 2 when
    the dumps cannot be read."""
    p = argparse.ArgumentParser(prog="python -m flambeau.distributed.flight_recorder",
                                description="Names the rank that fell behind or desynced, "
                                            "from the flight recorder dumps of all ranks.")
    p.add_argument("dir", help="the directory of <comm>_rank<N>.json dumps")
    p.add_argument("--comm", help="only this communicator")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    args = p.parse_args(argv)
    try:
        dumps = load_dumps(args.dir)
        reports = [analyze(dumps, args.comm)] if args.comm else analyze_all(dumps)
    except DumpError as e:
        print(f"flight_recorder: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        print(f"flight_recorder: malformed dump in {args.dir} ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([dict(dataclasses.asdict(r), ok=r.ok) for r in reports], indent=1))
    else:
        for r in reports:
            print(r.message)
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
