"""flambeau-run (python -m flambeau.distributed.run): torchrun's launcher for flambeau.

Starts --nproc-per-node copies of a script on this node with torchrun's environment (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), restarts the local group on failure up to
--max-restarts times, and reports the failed ranks. Static rendezvous (--nnodes N
--node-rank R, or --standalone) needs nothing else; --nnodes MIN:MAX uses flambeau.distributed.TCPStore.
"""
import argparse
import datetime
import os
import socket
import sys
import uuid

from flambeau.distributed import elastic

__all__ = ["get_args_parser", "parse_args", "main"]

DEFAULT_MASTER_PORT = 29500


def _env_default(dest, default):
    """torchrun reads each option's default from PET_<OPTION> in the environment."""
    return os.environ.get("PET_" + dest.upper(), default)


def get_args_parser():
    p = argparse.ArgumentParser(prog="flambeau-run", description="flambeau's distributed launcher (torchrun's flags)")

    def opt(*names, dest, default=None, **kw):
        p.add_argument(*names, dest=dest, default=_env_default(dest, default), **kw)

    def flag(*names, dest, help):
        p.add_argument(*names, dest=dest, action="store_true", default=str(_env_default(dest, "0")).lower() in ("1", "true"), help=help)

    opt("--nnodes", dest="nnodes", default="1:1", help="number of nodes, or MIN:MAX (elastic)")
    opt("--nproc-per-node", "--nproc_per_node", dest="nproc_per_node", default="1",
        help="workers per node: an int, or 'cpu'/'auto' (the number of cores)")
    opt("--node-rank", "--node_rank", dest="node_rank", type=int, default=0, help="this node's rank (static)")
    opt("--rdzv-backend", "--rdzv_backend", dest="rdzv_backend", default=None,
        help="'static' (fixed --nnodes N) or 'c10d' (store rendezvous; the default for MIN:MAX)")
    opt("--rdzv-endpoint", "--rdzv_endpoint", dest="rdzv_endpoint", default="", help="rendezvous host:port")
    opt("--rdzv-id", "--rdzv_id", "--run-id", "--run_id", dest="rdzv_id", default="none",
        help="job id (TORCHELASTIC_RUN_ID)")
    opt("--rdzv-conf", "--rdzv_conf", dest="rdzv_conf", default="",
        help="k=v,... : join_timeout, last_call_timeout (seconds), is_host")
    flag("--standalone", dest="standalone", help="single node: rendezvous on a free port of 127.0.0.1")
    opt("--max-restarts", "--max_restarts", dest="max_restarts", type=int, default=0,
        help="restarts of the worker group before failing")
    opt("--monitor-interval", "--monitor_interval", dest="monitor_interval", type=float, default=0.1,
        help="seconds between checks of the workers")
    opt("--shutdown-timeout", "--shutdown_timeout", dest="shutdown_timeout", type=float, default=30.0,
        help="seconds a worker gets after SIGTERM before SIGKILL")
    opt("--start-method", "--start_method", dest="start_method", default="spawn",
        choices=["spawn", "fork", "forkserver"], help="accepted for torchrun compatibility (workers are subprocesses)")
    opt("--role", dest="role", default="default", help="worker role (ROLE_NAME)")
    opt("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1", help="rank 0's address (static)")
    opt("--master-port", "--master_port", dest="master_port", type=int, default=None,
        help=f"rank 0's port (static; default {DEFAULT_MASTER_PORT})")
    opt("--local-addr", "--local_addr", dest="local_addr", default=None,
        help="this node's address as the others reach it (elastic)")
    flag("-m", "--module", dest="module", help="run the script as a module (python -m)")
    flag("--no-python", "--no_python", dest="no_python", help="run the script directly, without python")
    p.add_argument("training_script", help="the script (or module, or program) each worker runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def parse_args(argv=None):
    return get_args_parser().parse_args(argv)


def parse_nnodes(text):
    parts = text.split(":")
    try:
        if len(parts) == 1:
            lo = hi = int(parts[0])
        elif len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f"--nnodes must be N or MIN:MAX, got {text!r}") from None
    if not 1 <= lo <= hi:
        raise ValueError(f"--nnodes needs 1 <= MIN <= MAX, got {text!r}")
    return lo, hi


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_world_size(nproc_per_node):
    try:
        n = int(nproc_per_node)
    except ValueError:
        if nproc_per_node in ("cpu", "auto"):
            return cpu_count()
        raise ValueError(f"--nproc-per-node must be an int, 'cpu' or 'auto', got {nproc_per_node!r}") from None
    if n < 1:
        raise ValueError(f"--nproc-per-node must be >= 1, got {n}")
    return n


def parse_endpoint(endpoint, default_port=DEFAULT_MASTER_PORT):
    """'host:port' (IPv6 as [addr]:port) -> (host, port)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or "]" in port or (host.count(":") and not host.startswith("[")):
        host, port = endpoint, ""
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port) if port else default_port


def parse_rdzv_conf(text):
    conf = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--rdzv-conf items are key=value, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def _is_native_program(path):
    """An executable file that is a compiled program (ELF), not a Python script."""
    try:
        with open(path, "rb") as f:
            return os.access(path, os.X_OK) and f.read(4) == b"\x7fELF"
    except OSError:
        return False


def worker_command(args):
    """The worker's command line; a compiled program runs directly (as with --no-python)."""
    if args.module and args.no_python:
        raise ValueError("don't use both --no-python and -m/--module")
    if args.no_python or (not args.module and _is_native_program(args.training_script)):
        return [args.training_script, *args.training_script_args]
    if args.module:
        return [sys.executable, "-u", "-m", args.training_script, *args.training_script_args]
    return [sys.executable, "-u", args.training_script, *args.training_script_args]


def is_local_host(host):
    """Whether host names this machine (its address can be bound here)."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, _, _, _, addr in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((addr[0], 0))
            return True
        except OSError:
            pass
    return False


def address_towards(host, port):
    """This node's address on the route to host (what the other nodes can reach)."""
    try:
        family = socket.getaddrinfo(host, port)[0][0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, port))  # UDP: no packet is sent
            return s.getsockname()[0]
    except OSError:
        return socket.getfqdn()


def create_store(host, port, timeout_s, is_host):
    """flambeau.distributed.TCPStore on host:port: the server when this node hosts the endpoint
    (and the port is free), else a client. Imported here: it loads the C++ extension."""
    try:
        from flambeau.distributed import TCPStore
    except ImportError as e:
        raise RuntimeError("the elastic rendezvous (--nnodes MIN:MAX or --rdzv-backend c10d) needs "
                           f"flambeau.distributed.TCPStore, which this build lacks ({e})") from e
    timeout = datetime.timedelta(seconds=timeout_s)
    if is_host:
        try:
            return TCPStore(host, port, world_size=None, is_master=True, timeout=timeout, wait_for_workers=False), True
        except Exception:  # the port is taken: another agent on this machine serves it
            pass
    return TCPStore(host, port, world_size=None, is_master=False, timeout=timeout), False


def make_rendezvous(args, nproc):
    lo, hi = parse_nnodes(args.nnodes)
    backend = args.rdzv_backend or ("c10d" if lo < hi else "static")
    if args.standalone:
        if hi != 1:
            raise ValueError("--standalone runs a single node (--nnodes 1)")
        return elastic.StaticRendezvous(1, 0, nproc, "127.0.0.1", elastic.free_port("127.0.0.1"))
    if backend == "static":
        if lo != hi:
            raise ValueError(f"the static rendezvous needs a fixed --nnodes, got {args.nnodes!r}")
        if args.rdzv_endpoint:
            addr, port = parse_endpoint(args.rdzv_endpoint, args.master_port or DEFAULT_MASTER_PORT)
        else:
            addr, port = args.master_addr, args.master_port or DEFAULT_MASTER_PORT
        return elastic.StaticRendezvous(hi, args.node_rank, nproc, addr, port)
    if backend != "c10d":
        raise ValueError(f"unsupported --rdzv-backend {backend!r} (use 'static' or 'c10d')")
    if not args.rdzv_endpoint:
        raise ValueError("the elastic rendezvous (--nnodes MIN:MAX) needs --rdzv-endpoint host:port")
    conf = parse_rdzv_conf(args.rdzv_conf)
    host, port = parse_endpoint(args.rdzv_endpoint)
    join_timeout = float(conf.get("join_timeout", 600))
    wants_host = conf["is_host"].lower() in ("1", "true", "yes") if "is_host" in conf else is_local_host(host)
    store, hosting = create_store(host, port, join_timeout, wants_host)
    local_addr = args.local_addr or address_towards(host, port)
    return elastic.StoreRendezvous(store, args.rdzv_id, lo, hi, nproc, local_addr, join_timeout=join_timeout,
                                   last_call_timeout=float(conf.get("last_call_timeout", 30)), is_host=hosting)


def main(argv=None):
    """Runs the launcher; returns the exit code (0: every worker succeeded)."""
    parser = get_args_parser()
    args = parser.parse_args(argv)
    try:
        nproc = local_world_size(args.nproc_per_node)
        cmd = worker_command(args)
        if args.standalone and args.rdzv_id == "none":
            args.rdzv_id = str(uuid.uuid4())
        rendezvous = make_rendezvous(args, nproc)
    except (ValueError, RuntimeError) as e:  # bad options, or no rendezvous store
        parser.error(str(e))
    extra_env = {}
    if "OMP_NUM_THREADS" not in os.environ:
        extra_env["OMP_NUM_THREADS"] = str(max(1, cpu_count() // nproc))
    spec = elastic.WorkerSpec(cmd=cmd, nproc=nproc, max_restarts=args.max_restarts,
                              monitor_interval=args.monitor_interval, run_id=args.rdzv_id, role=args.role,
                              shutdown_timeout=args.shutdown_timeout, extra_env=extra_env)
    return elastic.run_agent(spec, rendezvous, script_name=args.training_script)


if __name__ == "__main__":
    sys.exit(main())
