"""The flight recorder reader (flambeau.distributed.flight_recorder): synthetic dumps of a rank
behind, a desync, a missing rank, a consistent run and unreadable input, checked through the
function API and the command line; and one end-to-end run with real processes
(dist/worker.py's scenario_desync) whose dumps must name the rank that skipped a collective."""
import json
import subprocess
import sys

import pytest

import flambeau.distributed as dist
from flambeau.distributed import flight_recorder as fr


def entry(seq, op="all_reduce", state="completed", sizes=((4,),), dtype="float32", out_sizes=None):
    sizes = [list(s) for s in sizes]
    out = sizes if out_sizes is None else [list(s) for s in out_sizes]
    return {"record_id": seq - 1, "pg_id": "world", "process_group": ["world", "world"],
            "collective_seq_id": seq, "p2p_seq_id": 0, "profiling_name": f"gloo:{op}",
            "input_sizes": sizes, "input_dtypes": [dtype] * len(sizes),
            "output_sizes": out, "output_dtypes": [dtype] * len(out),
            "time_created_ns": 1, "time_discovered_started_ns": 2, "time_discovered_completed_ns": 3,
            "duration_ms": 0.0, "timeout_ms": 1000, "state": state, "is_p2p": False}


def dump(rank, entries, ranks=(0, 1, 2), comm="world"):
    """A dump in the layout of src/flambeau/distributed/flight_recorder.cpp."""
    seqs = [e["collective_seq_id"] for e in entries]
    started = [e["collective_seq_id"] for e in entries if e["state"] != "scheduled"]
    done = [e["collective_seq_id"] for e in entries if e["state"] == "completed"]
    return {"version": "2.10", "rank": rank, "comm_rank": list(ranks).index(rank), "comm_size": len(ranks),
            "backend": "gloo", "pg_config": {comm: {"name": comm, "desc": "gloo", "ranks": list(ranks)}},
            "pg_status": {comm: {"last_enqueued_collective": max(seqs, default=0),
                                 "last_started_collective": max(started, default=0),
                                 "last_completed_collective": max(done, default=0)}},
            "entries": entries}


def write(dir, dumps):
    for d in dumps:
        comm = next(iter(d["pg_status"]))
        (dir / f"{comm}_rank{d['rank']}.json").write_text(json.dumps(d))


def cli(dir, *args):
    p = subprocess.run([sys.executable, "-m", "flambeau.distributed.flight_recorder", str(dir), *args],
                       capture_output=True, text=True, timeout=30, cwd=dir)
    return p.returncode, p.stdout, p.stderr


def completed(n, **kw):
    return [entry(s, **kw) for s in range(1, n + 1)]


def test_rank_behind(tmp_path):
    write(tmp_path, [dump(0, completed(7) + [entry(8, state="started")]),
                     dump(1, completed(7) + [entry(8, state="started")]),
                     dump(2, completed(7))])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert (rep.comm, rep.kind, rep.ranks_behind, rep.seq, rep.op) == ("world", "behind", [2], 8, "all_reduce")
    assert not rep.ok and rep.ranks == [0, 1, 2] and rep.ranks_missing == []
    want = ("communicator 'world': rank 2 is behind: its last collective is #7 (all_reduce, completed) "
            "while ranks 0, 1 wait in #8 (all_reduce, started)")
    assert rep.message == want
    code, out, err = cli(tmp_path)
    assert code == 1 and out.strip() == want, (out, err)


def test_two_ranks_behind_with_no_collective(tmp_path):
    write(tmp_path, [dump(0, [entry(1, op="barrier", state="started", sizes=())]), dump(1, []), dump(2, [])])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert rep.kind == "behind" and rep.ranks_behind == [1, 2] and rep.seq == 1 and rep.op == "barrier"
    assert "ranks 1, 2 are behind: they have run no collective while rank 0 waits in #1 (barrier, started)" in rep.message


@pytest.mark.parametrize("bad", [dict(op="broadcast"), dict(sizes=((5,),)), dict(dtype="float64")])
def test_desync(tmp_path, bad):
    write(tmp_path, [dump(0, completed(5) + [entry(6, state="started")]),
                     dump(1, completed(5) + [entry(6, state="started", **bad)]),
                     dump(2, completed(5) + [entry(6, state="started")])])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert (rep.kind, rep.seq, rep.op, rep.ranks_behind) == ("desync", 6, "all_reduce", [])
    assert rep.views[0] == rep.views[2] == "all_reduce [4] float32"
    assert rep.views[1] == {"op": "broadcast [4] float32", "sizes": "all_reduce [5] float32",
                            "dtype": "all_reduce [4] float64"}[next(iter(bad))]
    assert rep.message == f"communicator 'world': desync at collective #6: ranks 0, 2 ran all_reduce [4] float32; rank 1 ran {rep.views[1]}"
    code, out, _ = cli(tmp_path)
    assert code == 1 and "desync at collective #6" in out and f"rank 1 ran {rep.views[1]}" in out


def test_desync_before_a_rank_falls_behind_is_named_first(tmp_path):
    write(tmp_path, [dump(0, completed(3) + [entry(4, op="barrier", sizes=()), entry(5, state="started")]),
                     dump(1, completed(3) + [entry(4, state="failed")])])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert rep.kind == "desync" and rep.seq == 4 and rep.ranks_missing == [2]
    assert rep.message.splitlines()[0] == "communicator 'world': no dump from rank 2 (dead or stuck?)"


def test_ops_whose_shapes_differ_by_rank_are_no_desync(tmp_path):
    # gather: only the root has outputs; all_to_all_single: uneven splits.
    def ents(rank):
        outs = ((4,),) * 3 if rank == 0 else ()
        return [entry(1, op="gather", out_sizes=outs), entry(2, op="all_to_all_single", sizes=((rank + 1, 2),))]
    write(tmp_path, [dump(r, ents(r)) for r in range(3)])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert rep.ok and rep.message == "communicator 'world': no mismatch found: all 3 ranks completed collective #2"


def test_missing_rank(tmp_path):
    write(tmp_path, [dump(r, completed(4), ranks=range(4)) for r in range(3)])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert (rep.kind, rep.ranks_missing, rep.ranks) == ("missing", [3], [0, 1, 2])
    assert rep.message == "communicator 'world': no dump from rank 3 (dead or stuck?)"
    code, out, _ = cli(tmp_path)
    assert code == 1 and "no dump from rank 3 (dead or stuck?)" in out


def test_all_consistent(tmp_path):
    write(tmp_path, [dump(r, completed(5)) for r in range(3)])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert rep.ok and rep.kind == "ok" and rep.seq == 5 and rep.op == "all_reduce"
    assert rep.message == "communicator 'world': no mismatch found: all 3 ranks completed collective #5"
    code, out, err = cli(tmp_path)
    assert code == 0 and out.strip() == rep.message and err == ""


def test_all_in_the_same_collective(tmp_path):
    write(tmp_path, [dump(r, completed(2) + [entry(3, state="failed" if r else "started")]) for r in range(3)])
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert rep.ok and rep.seq == 3
    assert rep.message.endswith("all 3 ranks reached collective #3 (all_reduce); started on rank 0, failed on ranks 1, 2")


def test_several_communicators_comm_and_json(tmp_path):
    write(tmp_path, [dump(r, completed(2), ranks=(0, 1), comm="a") for r in range(2)] +
          [dump(0, completed(3), ranks=(0, 2), comm="b"), dump(2, completed(2), ranks=(0, 2), comm="b")])
    dumps = fr.load_dumps(tmp_path)
    assert sorted(dumps) == ["a", "b"] and sorted(dumps["b"]) == [0, 2]
    assert [r.kind for r in fr.analyze_all(dumps)] == ["ok", "behind"]
    assert fr.analyze(dumps).comm == "b" and fr.analyze(dumps, "a").ok
    code, out, _ = cli(tmp_path)
    assert code == 1 and out.splitlines()[0].startswith("communicator 'a': no mismatch")
    assert "communicator 'b': rank 2 is behind" in out.splitlines()[1]
    assert cli(tmp_path, "--comm", "a")[0] == 0
    code, out, _ = cli(tmp_path, "--comm", "b", "--json")
    (got,) = json.loads(out)
    assert code == 1 and got["kind"] == "behind" and got["ranks_behind"] == [2] and got["seq"] == 3
    code, _, err = cli(tmp_path, "--comm", "c")
    assert code == 2 and "no dumps of communicator 'c'" in err


def test_unreadable_input(tmp_path):
    code, out, err = cli(tmp_path)
    assert code == 2 and "no flight recorder dumps" in err and out == ""
    with pytest.raises(fr.DumpError, match="no flight recorder dumps"):
        fr.load_dumps(tmp_path)
    write(tmp_path, [dump(0, completed(1))])
    (tmp_path / "world_rank1.json").write_text('{"rank": 1, "entries": [')
    code, _, err = cli(tmp_path)
    assert code == 2 and "world_rank1.json" in err and "JSON" in err
    (tmp_path / "world_rank1.json").write_text('{"hello": 1}')
    with pytest.raises(fr.DumpError, match="not a flight recorder dump"):
        fr.load_dumps(tmp_path)
    (tmp_path / "empty").mkdir()
    code, _, err = cli(tmp_path / "empty")
    assert code == 2 and "no flight recorder dumps" in err


@pytest.mark.skipif(not dist.is_gloo_available(), reason="flambeau built without Gloo")
def test_real_ranks_reader_names_the_rank_that_skipped_a_collective(tmp_path):
    from dist import harness
    res = harness.run("desync", 3, timeout=30, env={"FLAMBEAU_FR_DUMP_DIR": str(tmp_path)})
    res.check_ok()
    rep = fr.analyze(fr.load_dumps(tmp_path))
    assert (rep.comm, rep.kind, rep.ranks_behind, rep.seq, rep.op) == ("fr", "behind", [2], 4, "all_reduce"), rep.message
    code, out, _ = cli(tmp_path)
    assert code == 1 and "rank 2 is behind: its last collective is #3 (all_reduce, completed)" in out
    assert "ranks 0, 1 wait in #4 (all_reduce, " in out
