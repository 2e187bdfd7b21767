"""The pyserver family's systems: real Python HTTP servers (uvicorn with httptools, uvicorn with
h11, aiohttp's web server), each on each asyncio loop (evloop, uvloop, rloop, the stock loop),
started by py_server.py under the Python that --python names; which of them that Python can run
(and the pip command for what it lacks); and the target of issue 41 (evloop >= 1.0x uvloop)."""

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_server.py")

# server: (the packages it imports, what it is)
PY_SERVERS = {
    "uvicorn-httptools": (("uvicorn", "httptools"), "uvicorn, httptools parser, a bare ASGI app"),
    "uvicorn-h11": (("uvicorn", "h11"), "uvicorn, h11 parser (pure Python), a bare ASGI app"),
    "aiohttp": (("aiohttp",), "aiohttp.web, one GET route"),
}

# loop: the package that provides it (None: the standard library's)
PY_LOOPS = {"evloop": "evloop", "uvloop": "uvloop", "rloop": "rloop", "asyncio": None}

PY_SYSTEMS = [f"{s}/{loop}" for s in PY_SERVERS for loop in PY_LOOPS]

PY_BASELINE = "uvloop"

PY_MODES = ("keep-alive", "close")

# Where --python's Python gets each package.
PIP_NAME = {"evloop": ". (the repository root: this package)", "uvicorn": "uvicorn",
            "httptools": "httptools", "h11": "h11", "aiohttp": "aiohttp", "uvloop": "uvloop",
            "rloop": "rloop"}

# The interpreter that runs the servers (measure() sets it from --python).
PY = {"python": sys.executable}


def is_pyserver(system):
    return system.split("/", 1)[0] in PY_SERVERS


def split(system):
    """"uvicorn-h11/evloop" -> ("uvicorn-h11", "evloop")."""
    return tuple(system.split("/", 1))


def py_command(system):
    server, loop = split(system)
    return [PY["python"], SCRIPT, "--server", server, "--loop", loop]


def needs(system):
    server, loop = split(system)
    return PY_SERVERS[server][0] + ((PY_LOOPS[loop],) if PY_LOOPS[loop] else ())


def pip_command(python, packages):
    names = [PIP_NAME[p] for p in packages]
    plain = [n for n in names if not n.startswith(".")]
    cmd = [f"{python} -m pip install {' '.join(plain)}"] if plain else []
    if "evloop" in packages:
        cmd.append(f"{python} -m pip install . (from the repository root)")
    return " and ".join(cmd)


def probe(python):
    """What py_server.py --probe prints under python: {package: {"version"} or {"error"}}."""
    try:
        p = subprocess.run([python, SCRIPT, "--probe"], capture_output=True, text=True,
                           timeout=120)
    except OSError as e:
        sys.exit(f"pyserver family: cannot run --python {python}: {e}")
    if p.returncode != 0:
        sys.exit(f"pyserver family: {python} {SCRIPT} --probe failed: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout)


def available_py_systems(wanted):
    """(the systems of wanted that --python can run, {system: why not} for the others,
    {package: version}). Exits, naming the pip command, when it can run none."""
    info = probe(PY["python"])
    pkgs = info["packages"]
    ok, skipped = [], {}
    for s in wanted:
        if s not in PY_SYSTEMS:
            sys.exit(f"unknown system {s}; the pyserver family's: {', '.join(PY_SYSTEMS)}")
        missing = [p for p in needs(s) if "error" in pkgs.get(p, {"error": "not probed"})]
        if missing:
            skipped[s] = (f"{PY['python']} cannot import {', '.join(missing)} "
                          f"({pkgs[missing[0]]['error'][:120]}); "
                          f"install with {pip_command(PY['python'], missing)}")
        else:
            ok.append(s)
    if not ok:
        lacking = sorted({p for s in wanted for p in needs(s)
                          if "error" in pkgs.get(p, {"error": ""})})
        sys.exit(f"pyserver family: {PY['python']} (Python {info['version']}) can run none of "
                 f"{', '.join(wanted)}: it lacks {', '.join(lacking)}. Install them with "
                 f"{pip_command(PY['python'], lacking)}, or name another Python with --python.")
    for s, why in skipped.items():
        print(f"note: {s}: not measured: {why}", flush=True)
    versions = {p: v.get("version") for p, v in pkgs.items() if "error" not in v}
    return ok, skipped, {"python": info["version"], **versions}


def case_key(case):
    """A pyserver cell's key: "keep-alive/100", "close/100"."""
    return f"{'close' if case.get('close') else 'keep-alive'}/{case['conns']}"


def py_targets(cells, keys):
    """Issue 41's target, evloop's req/s >= 1.0x uvloop's, per server and case: one entry per
    server and key, as net_summary.evaluate_targets' entries."""
    from net_summary import cell_failed, half_spread, med, ratio

    out = []
    for server in PY_SERVERS:
        s, ref = f"{server}/evloop", f"{server}/{PY_BASELINE}"
        for key in keys:
            failed = bool(cell_failed(cells, s, key) or cell_failed(cells, ref, key))
            v = ratio(med(cells, s, key, "rps"), med(cells, ref, key, "rps"))
            met = None if v is None else v >= 1.0
            noise = max(half_spread(cells, s, key, "rps"), half_spread(cells, ref, key, "rps"))
            out.append({"target": f"{server}: evloop >= 1.0x uvloop", "system": s,
                        "reference": ref, "conns": key, "kind": "rps", "bar": 1.0, "value": v,
                        "met": met, "failed": failed,
                        "within_spread": bool(v is not None and not met and
                                              abs(v - 1.0) <= noise)})
    return out
