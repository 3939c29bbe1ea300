"""Seed 000's race on SQLMesh, through its Python API.

Usage: python race_sqlmesh.py PROJECT T_PLAN T_RUN NO_GAPS(0|1) RESULT.json

The sqlmesh CLI cannot save a plan and apply it later, so this builds the
prod plan at T_PLAN (Context.plan_builder(...).build(), the API seed 000's
pull request names), lets the scheduler run at T_RUN (Context.run, which
advances the incumbent), and then applies the plan built before
(Context.apply). "Now" is frozen with time_machine for each stage. Writes
{"outcome", "message"} to RESULT.json.
"""

import json
import sys
import traceback

import time_machine


def main() -> None:
    project, t_plan, t_run, no_gaps, result = sys.argv[1:6]
    from sqlmesh import Context
    from sqlmesh.utils.date import to_datetime

    with time_machine.travel(t_plan, tick=False):
        planner = Context(paths=[project])
        plan = planner.plan_builder(
            "prod", execution_time=t_plan, no_gaps=no_gaps == "1"
        ).build()
        backfill = [
            f"{si.snapshot_id.name}: {len(si.intervals)} interval(s) to "
            + (to_datetime(si.intervals[-1][1]).isoformat() if si.intervals else "-")
            for si in plan.missing_intervals
        ]
    with time_machine.travel(t_run, tick=False):
        scheduler = Context(paths=[project])
        status = scheduler.run("prod", execution_time=t_run)
        n, last, total = scheduler.engine_adapter.fetchone(
            "SELECT count(*), max(event_ts), sum(amount) FROM shop.events WHERE event_ts >= '2026-01-01'"
        )
        before = f"{n} rows on 2026-01-01, last {last.isoformat() if last else '-'}; amount summed {total:g}"
        scheduler.close()
        try:
            planner.apply(plan)
            outcome, message = "applied", ""
        except Exception as e:  # noqa: BLE001 - reported, whatever it is
            outcome = "refused"
            message = f"{type(e).__name__}: {e}"
            traceback.print_exc()
    with open(result, "w") as f:
        json.dump(
            {"outcome": outcome, "message": " ".join(message.split()), "run": str(status), "backfill": backfill,
             "before_extent": before},
            f,
        )
    print(outcome, message)


if __name__ == "__main__":
    main()
