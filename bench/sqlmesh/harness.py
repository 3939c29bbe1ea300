"""Side by side with SQLMesh: one project, both tools, DuckDB.

Run through bench/sqlmesh/run.sh (make sqlmesh-bench), which builds gapless
and prepares SQLMesh's virtual environment; this file runs under that
environment's Python (it needs sqlmesh's duckdb and time_machine).

For every repetition, in fresh copies of bench/sqlmesh/project (one per
tool, each with its own DuckDB file), it times with /usr/bin/time -v:

  plan     the first prod plan, built and not applied, on an empty warehouse
  deploy   the first prod plan applied (plan --auto-apply), on an empty warehouse
  run      the scheduler, T_RUN, on the deployed warehouse
  change   one model edited, then plan --auto-apply, at T_CHANGE

and after deploy, run and change it compares the rows each tool serves for
every model through prod's views. Then it plays seed 000's race on both
(see race_sqlmesh.py) and writes RESULTS.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import decimal
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "project"
REPO = HERE.parent.parent

# Fixed times keep every run the same. The five-minute model starts on
# 2025-01-01, a year (105,120 intervals) before the deploy.
T_DEPLOY = "2026-01-01T00:30:00Z"
T_RUN = "2026-01-01T06:30:00Z"
T_CHANGE = "2026-01-01T06:32:00Z"
# The race (seed 000): prod deployed at T_DEPLOY, a breaking change planned at
# T_RACE_PLAN, the scheduler advancing the incumbent at T_RACE_RUN, then the
# plan applied.
T_RACE_PLAN = "2026-01-01T00:40:00Z"
T_RACE_RUN = "2026-01-01T01:30:00Z"

MODELS = [
    "shop.customers",
    "shop.events",
    "shop.hourly_revenue",
    "shop.daily_revenue",
    "shop.customer_totals",
    "shop.top_customers",
]

GAPLESS_YAML = """\
# Written by bench/sqlmesh/harness.py into a temporary copy of the project.
warehouse: duckdb://warehouse.duckdb
state: sqlite://.gapless/state.db
model_defaults:
  dialect: duckdb
"""

SQLMESH_CONFIG_YAML = """\
# Written by bench/sqlmesh/harness.py into a temporary copy of the project.
gateways:
  local:
    connection:
      type: duckdb
      database: warehouse.duckdb
default_gateway: local
model_defaults:
  dialect: duckdb
"""

# The change step: a column added to the hourly model, which no child reads.
CHANGE_FILE = "models/hourly_revenue.sql"
CHANGE_FROM = "  sum(e.amount) AS revenue\n"
CHANGE_TO = "  sum(e.amount) AS revenue,\n  max(e.amount) AS biggest_amount\n"
# The race's change: the five-minute model's amounts computed differently
# (breaking, and so for everything reading it). The race is played on
# shop.events, whose parents are none: see README.md for why not on
# shop.hourly_revenue.
RACE_FILE = "models/events.sql"
RACE_FROM = "* 2.5)::DOUBLE AS amount"
RACE_TO = "* 3.5)::DOUBLE AS amount"


class Tool:
    """One tool's command line, run in a project folder."""

    def __init__(self, name: str, argv_prefix: list[str], env: dict[str, str]):
        self.name = name
        self.argv_prefix = argv_prefix
        self.env = env

    def argv(self, step: str, when: str) -> tuple[list[str], str | None]:
        raise NotImplementedError


class Gapless(Tool):
    def argv(self, step: str, when: str) -> tuple[list[str], str | None]:
        base = self.argv_prefix + ["--log-level", "warn"]
        if step == "plan":
            return base + ["plan", "--execution-time", when], None
        if step in ("deploy", "change"):
            return base + ["plan", "--auto-apply", "--execution-time", when], None
        if step == "run":
            return base + ["run", "--execution-time", when], None
        raise ValueError(step)


class SQLMesh(Tool):
    def argv(self, step: str, when: str) -> tuple[list[str], str | None]:
        # sqlmesh_at.py freezes "now" at `when` (sqlmesh run has no
        # --execution-time); plan gets --execution-time as well.
        base = self.argv_prefix + [when]
        if step == "plan":
            # Without --auto-apply, --no-prompts still asks "Apply - Backfill
            # Tables [y/n]"; answer n, so the plan is built and printed only.
            return base + ["plan", "--no-prompts", "--execution-time", when], "n\n"
        if step in ("deploy", "change"):
            return base + ["plan", "--no-prompts", "--auto-apply", "--execution-time", when], None
        if step == "run":
            return base + ["run"], None
        raise ValueError(step)


class Measure:
    def __init__(self, wall: float, rss_kb: int, rc: int, out: str):
        self.wall = wall
        self.rss_kb = rss_kb
        self.rc = rc
        self.out = out


def timed(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None, log: Path) -> Measure:
    """Runs argv under /usr/bin/time -v; wall time from the monotonic clock,
    peak RSS from time's report. Output goes to log."""
    report = log.with_suffix(".time")
    cmd = ["/usr/bin/time", "-v", "-o", str(report)] + argv
    start = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, input=stdin, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    wall = time.monotonic() - start
    log.write_text(proc.stdout)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report.read_text())
    rss = int(m.group(1)) if m else -1
    return Measure(wall, rss, proc.returncode, proc.stdout)


def fresh_copy(root: Path, name: str, tool: str) -> Path:
    """A copy of the project for one tool, with its own warehouse file."""
    d = root / name
    shutil.copytree(PROJECT, d)
    # Both files in both copies: the project as a SQLMesh user's folder with
    # a gapless.yaml beside its config.yaml (each tool ignores the other's).
    (d / "gapless.yaml").write_text(GAPLESS_YAML)
    (d / "config.yaml").write_text(SQLMESH_CONFIG_YAML)
    return d


def wipe_warehouse(d: Path) -> None:
    """Back to an empty warehouse and state (SQLMesh keeps its state in the
    warehouse file; gapless in .gapless/state.db)."""
    for p in ("warehouse.duckdb", "warehouse.duckdb.wal"):
        (d / p).unlink(missing_ok=True)
    shutil.rmtree(d / ".gapless", ignore_errors=True)
    shutil.rmtree(d / ".cache", ignore_errors=True)


def edit(d: Path, old: str, new: str, file: str = CHANGE_FILE) -> None:
    p = d / file
    text = p.read_text()
    if old not in text:
        raise SystemExit(f"{p}: the harness's edit does not apply ({old!r} not found)")
    p.write_text(text.replace(old, new, 1))


# ---------------------------------------------------------------- rows


def type_family(t: str) -> str:
    t = t.upper()
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
             "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"):
        return "integer"
    if t in ("FLOAT", "DOUBLE") or t.startswith("DECIMAL"):
        return "number"
    if t in ("VARCHAR", "TEXT"):
        return "text"
    return t.lower()


def norm_value(v):
    if isinstance(v, float):
        return None if math.isnan(v) else float(f"{v:.10g}")
    if isinstance(v, decimal.Decimal):
        return float(f"{float(v):.10g}")
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    return v


def served(db: Path) -> dict[str, dict]:
    """Every model's rows through prod's view: columns, raw types, and a
    multiset of normalised rows (columns in name order)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for m in MODELS:
            try:
                rel = con.sql(f"SELECT * FROM {m}")
                cols = list(rel.columns)
                types = [str(t) for t in rel.types]
                rows = rel.fetchall()
            except duckdb.Error as e:
                out[m] = {"error": str(e).splitlines()[0]}
                continue
            order = sorted(range(len(cols)), key=lambda i: cols[i])
            bag = collections.Counter(tuple(norm_value(r[i]) for i in order) for r in rows)
            out[m] = {"columns": cols, "types": types, "rows": bag, "count": len(rows)}
        return out
    finally:
        con.close()


def compare(g: dict, s: dict) -> tuple[bool, list[str]]:
    """Rows equal per model (order-insensitive, values normalised, types by
    family); notes list every difference, and raw type differences that the
    normalisation forgave."""
    equal = True
    notes = []
    for m in MODELS:
        a, b = g[m], s[m]
        if "error" in a or "error" in b:
            equal = False
            notes.append(f"{m}: gapless {a.get('error', 'ok')}; sqlmesh {b.get('error', 'ok')}")
            continue
        if sorted(a["columns"]) != sorted(b["columns"]):
            equal = False
            notes.append(f"{m}: columns differ: gapless {a['columns']}, sqlmesh {b['columns']}")
            continue
        ta = dict(zip(a["columns"], a["types"]))
        tb = dict(zip(b["columns"], b["types"]))
        for c in sorted(ta):
            if ta[c] != tb[c]:
                if type_family(ta[c]) != type_family(tb[c]):
                    equal = False
                    notes.append(f"{m}.{c}: type gapless {ta[c]}, sqlmesh {tb[c]}")
                else:
                    notes.append(f"{m}.{c}: type gapless {ta[c]}, sqlmesh {tb[c]} (same after normalising)")
        if a["columns"] != b["columns"]:
            notes.append(f"{m}: column order gapless {a['columns']}, sqlmesh {b['columns']}")
        if a["rows"] != b["rows"]:
            equal = False
            only_g = a["rows"] - b["rows"]
            only_s = b["rows"] - a["rows"]
            names = sorted(a["columns"])
            notes.append(
                f"{m}: rows differ: gapless {a['count']}, sqlmesh {b['count']}; "
                f"{sum(only_g.values())} only in gapless, e.g. {sample(only_g, names)}; "
                f"{sum(only_s.values())} only in sqlmesh, e.g. {sample(only_s, names)}"
            )
    return equal, notes


def sample(bag: collections.Counter, names: list[str], k: int = 3) -> str:
    rows = sorted(bag.elements(), key=repr)
    picked = rows[:k]
    return "[" + "; ".join(
        ", ".join(f"{n}={v}" for n, v in zip(names, r)) for r in picked
    ) + ("; ..." if len(rows) > k else "") + "]"


def counts(rows: dict) -> str:
    return ", ".join(
        f"{m.split('.')[1]} {rows[m].get('count', 'error')}" for m in MODELS
    )


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gapless", required=True, help="the gapless binary")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--race-only", action="store_true", help="play only seed 000's race (prints, writes nothing)")
    args = ap.parse_args()

    env = dict(os.environ)
    env["SQLMESH__DISABLE_ANONYMIZED_ANALYTICS"] = "1"  # no network here, and none timed
    env.pop("TZ", None)
    tools = {
        "gapless": Gapless("gapless", [str(Path(args.gapless).resolve())], env),
        "sqlmesh": SQLMesh("sqlmesh", [sys.executable, str(HERE / "sqlmesh_at.py")], env),
    }
    work = Path(tempfile.mkdtemp(prefix="gapless-sqlmesh-bench-"))
    print(f"work folder: {work}", flush=True)

    steps = [("plan", T_DEPLOY), ("deploy", T_DEPLOY), ("run", T_RUN), ("change", T_CHANGE)]
    measures: dict[tuple[str, str], list[Measure]] = collections.defaultdict(list)
    equal_after: dict[str, bool] = {}
    notes_after: dict[str, list[str]] = {}
    counts_after: dict[str, dict[str, str]] = {}
    failures: list[str] = []

    if args.race_only:
        for label, info in play_race(work, tools).items():
            info.pop("rows", None)
            print(label, json.dumps(info, indent=1, default=str))
        return 0
    for r in range(1, args.repeats + 1):
        dirs = {name: fresh_copy(work, f"r{r}-{name}", name) for name in tools}
        for step, when in steps:
            rows = {}
            for name, tool in tools.items():
                d = dirs[name]
                if step == "deploy":
                    wipe_warehouse(d)  # the deploy starts from an empty warehouse too
                if step == "change":
                    edit(d, CHANGE_FROM, CHANGE_TO)
                argv, stdin = tool.argv(step, when)
                m = timed(argv, d, tool.env, stdin, work / f"r{r}-{name}-{step}.log")
                print(f"[{r}/{args.repeats}] {name:8} {step:7} {m.wall:7.2f} s  {m.rss_kb / 1024:7.1f} MiB  exit {m.rc}", flush=True)
                if m.rc != 0:
                    failures.append(f"{name} {step} (repetition {r}) exited {m.rc}: {tail(m.out)}")
                measures[(name, step)].append(m)
                if step != "plan":
                    rows[name] = served(d / "warehouse.duckdb")
            if step == "plan":
                continue
            eq, notes = compare(rows["gapless"], rows["sqlmesh"])
            equal_after[step] = equal_after.get(step, True) and eq
            for n in notes:
                notes_after.setdefault(step, [])
                if n not in notes_after[step]:
                    notes_after[step].append(n)
            counts_after[step] = {name: counts(rows[name]) for name in tools}
            print(f"[{r}/{args.repeats}] rows after {step}: {'equal' if eq else 'DIFFERENT'}", flush=True)
            for n in notes:
                print("    " + n, flush=True)

    race = play_race(work, tools)

    md = render(measures, equal_after, notes_after, counts_after, race, failures, args.repeats, tools["gapless"].argv_prefix[0])
    Path(args.out).write_text(md)
    print()
    print(md)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    # Rows that differ are a finding, reported in the table; a command that
    # failed means the table is not a comparison, so that is an error.
    return 1 if failures else 0


def tail(s: str, n: int = 6) -> str:
    return " | ".join(s.strip().splitlines()[-n:])


# ---------------------------------------------------------------- the race


def play_race(work: Path, tools: dict[str, Tool]) -> dict[str, dict]:
    """Seed 000 on both tools: prod deployed at T_DEPLOY; a breaking change of
    shop.events planned at T_RACE_PLAN against that incumbent; the scheduler
    runs at T_RACE_RUN and advances the incumbent; then the plan is
    applied."""
    out = {}

    # gapless: plan --out, run, apply (strict, the default policy).
    g = tools["gapless"]
    d = fresh_copy(work, "race-gapless", "gapless")
    base = g.argv_prefix + ["--log-level", "warn"]
    log = []

    def sh(argv: list[str]) -> subprocess.CompletedProcess:
        p = subprocess.run(base + argv, cwd=d, env=g.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        log.append(f"$ gapless {' '.join(argv)}  (exit {p.returncode})\n{p.stdout}")
        return p

    sh(["plan", "--auto-apply", "--execution-time", T_DEPLOY])
    edit(d, RACE_FROM, RACE_TO, RACE_FILE)
    pl = sh(["plan", "--out", "p.json", "--execution-time", T_RACE_PLAN])
    planned = [l.strip() for l in pl.stdout.splitlines() if " intervals in " in l or "whole table" in l or "reuses" in l]
    sh(["run", "--execution-time", T_RACE_RUN])
    before = served(d / "warehouse.duckdb")
    ap = sh(["apply", "p.json", "--execution-time", T_RACE_RUN])
    after = served(d / "warehouse.duckdb")
    (work / "race-gapless.log").write_text("\n".join(log))
    out["gapless (strict, default)"] = {
        "outcome": ("applied" if ap.returncode == 0 else f"refused, exit {ap.returncode}"),
        "message": first_error(ap.stdout),
        "rows": after,
        "before_extent": events_extent(before),
        "backfill": planned,
    }

    # SQLMesh: the CLI cannot save a plan, so its Python API builds it and
    # applies it later (race_sqlmesh.py), once with the CLI's default
    # (no_gaps off) and once with --no-gaps.
    s = tools["sqlmesh"]
    for label, no_gaps in (("sqlmesh (default)", False), ("sqlmesh --no-gaps", True)):
        d = fresh_copy(work, "race-" + ("sqlmesh-nogaps" if no_gaps else "sqlmesh"), "sqlmesh")
        p = subprocess.run(
            s.argv_prefix + [T_DEPLOY, "plan", "--no-prompts", "--auto-apply", "--execution-time", T_DEPLOY],
            cwd=d, env=s.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        if p.returncode != 0:
            out[label] = {"outcome": f"deploy failed: {tail(p.stdout)}", "message": "", "rows": None}
            continue
        edit(d, RACE_FROM, RACE_TO, RACE_FILE)
        result = work / f"race-{'nogaps' if no_gaps else 'default'}.json"
        p = subprocess.run(
            [sys.executable, str(HERE / "race_sqlmesh.py"), str(d), T_RACE_PLAN, T_RACE_RUN,
             "1" if no_gaps else "0", str(result)],
            cwd=d, env=s.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        (work / f"race-{'nogaps' if no_gaps else 'default'}.log").write_text(p.stdout)
        info = json.loads(result.read_text()) if result.exists() else {"outcome": f"crashed: {tail(p.stdout)}", "message": ""}
        after = served(d / "warehouse.duckdb")
        info["rows"] = after
        out[label] = info
    return out


def first_error(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("gapless:"):
            i = text.index(line)
            return " ".join(l.strip() for l in text[i:].splitlines()[:8])
    return ""


def events_extent(rows: dict) -> str:
    """What shop.events serves on the deploy's day: rows, the last one, and
    the sum of amount, which tells the old version (* 2.5) from the new one
    (* 3.5)."""
    h = rows["shop.events"]
    if "error" in h:
        return h["error"]
    names = sorted(h["columns"])
    ti = names.index("event_ts")
    ai = names.index("amount")
    day = [r for r in h["rows"].elements() if str(r[ti]) >= "2026-01-01"]
    last = max((r[ti] for r in day), default="-")
    total = sum(r[ai] for r in day)
    return f"{len(day)} rows on 2026-01-01, last {last}; amount summed {total:g}"


# ---------------------------------------------------------------- report


def render(measures, equal_after, notes_after, counts_after, race, failures, repeats, gapless_bin) -> str:
    con = duckdb.connect()
    duck = con.sql("SELECT version()").fetchone()[0]
    con.close()
    import sqlmesh  # noqa: PLC0415

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                            text=True, stdout=subprocess.PIPE).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                           text=True, stdout=subprocess.PIPE).stdout.strip()
    gver = subprocess.run([gapless_bin, "version"], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.strip().replace("\n", "; ")
    lines = [
        "# gapless side by side with SQLMesh",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `make sqlmesh-bench` "
        f"on {os.cpu_count()} cores; gapless commit {commit}{' (with uncommitted changes)' if dirty else ''} "
        f"({gver}); SQLMesh {sqlmesh.__version__}; DuckDB {duck} (SQLMesh's Python package); "
        f"Python {sys.version.split()[0]}.",
        "",
        "The project is `bench/sqlmesh/project`: a seed, a five-minute `INCREMENTAL_BY_TIME_RANGE` "
        "model starting 2025-01-01 (105,126 intervals at the deploy), an hourly and a daily one, "
        "a `FULL` and a `VIEW`. "
        f"Deploy at {T_DEPLOY}, run at {T_RUN}, change (a column added to `shop.hourly_revenue`) at {T_CHANGE}. "
        f"Median of {repeats} repetitions; each step on a fresh DuckDB file (plan and deploy on an empty one); "
        "peak RSS from `/usr/bin/time -v`.",
        "",
        "| step | tool | wall time (s) | peak RSS (MiB) | ratio gapless/SQLMesh (time, RSS) | rows equal after the step |",
        "|---|---|---:|---:|---|---|",
    ]
    for step in ("plan", "deploy", "run", "change"):
        g = measures[("gapless", step)]
        s = measures[("sqlmesh", step)]
        gw, gr = statistics.median(m.wall for m in g), statistics.median(m.rss_kb for m in g) / 1024
        sw, sr = statistics.median(m.wall for m in s), statistics.median(m.rss_kb for m in s) / 1024
        eq = "n/a (nothing applied)" if step == "plan" else ("yes" if equal_after.get(step) else "**no**")
        lines.append(f"| {step} | gapless | {gw:.2f} | {gr:.0f} | {gw / sw:.3f}, {gr / sr:.2f} | {eq} |")
        lines.append(f"| {step} | SQLMesh | {sw:.2f} | {sr:.0f} | | |")
    lines += ["", "Rows served after each step (per model, through prod's views):", ""]
    for step in ("deploy", "run", "change"):
        if step in counts_after:
            lines.append(f"- after {step}: gapless {counts_after[step]['gapless']}; SQLMesh {counts_after[step]['sqlmesh']}")
            for n in notes_after.get(step, []):
                lines.append(f"  - {n}")
    lines += [
        "",
        "## Seed 000's race",
        "",
        f"prod deployed at {T_DEPLOY}; a breaking change of the five-minute `shop.events` "
        f"(`amount` from `* 2.5` to `* 3.5`) planned at {T_RACE_PLAN}; the scheduler (`run`) at "
        f"{T_RACE_RUN} advances the incumbent; then the plan is applied. The summed amount tells the "
        "versions apart (the new one's amounts are 3.5/2.5 of the old one's).",
        "",
        "| tool | outcome | what it said | shop.events served before the apply | served afterwards |",
        "|---|---|---|---|---|",
    ]
    for label, info in race.items():
        msg = (info.get("message") or "").replace("|", "\\|")
        extent = events_extent(info["rows"]) if info.get("rows") else "-"
        lines.append(f"| {label} | {info['outcome']} | {msg} | {info.get('before_extent', '-')} | {extent} |")
    lines += ["", "What each plan was to backfill when it was built:", ""]
    for label, info in race.items():
        lines.append(f"- {label}: " + "; ".join(info.get("backfill") or ["-"]))
    if failures:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in failures]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
