#!/usr/bin/env python3
"""Print the cost of each scenario under each mode as a Markdown table (docs/guide.md, "What a fault costs").

Runs `pdref sim run FILE... --mode all --json` and reads each row's `metrics` (docs/metrics.md):
goodput within the SLOs, p99 TTFT, the burst's goodput before / lowest window / time to
recover, capacity held after the client's end beyond the grace (slot-seconds, KV page-seconds)
and the most requests a worker had queued.
"""
import argparse
import json
import subprocess
import sys

DEFAULT = [
    "scenarios/abort-storm-cascade-28651.json",
    "scenarios/decode-crash-restart-under-load.json",
    "scenarios/decode-kv-exhaustion-keeps-prefill-bootstrapping.json",
    "scenarios/pr1150-decode-failures-1pct-10min.json",
    "scenarios/overload-o11-closed-loop-cascade.json",
    "scenarios/overload-load-spike-recovery.json",
    "scenarios/overload-breaker-under-saturation.json",
]


def fmt_s(ms):
    return "-" if ms is None else f"{ms / 1000:.1f} s"


def recovery(rec):
    if not rec:
        return "-", "-", "-"
    pre = f"{rec['pre_goodput_rps']:.1f}/s"
    low = f"{rec['min_goodput_rps']:.1f}/s"
    st = rec.get("status")
    if st == "recovered":
        return pre, low, fmt_s(rec.get("recovered_after_ms"))
    return pre, low, "never" if st == "never" or st == "not_recovered" else str(st)


def row(r):
    m = r["metrics"]
    cap = m.get("capacity", {})
    pre, low, rec = recovery(m.get("recovery"))
    viol = r.get("violated") or []
    if isinstance(viol, str):
        viol = [v for v in viol.split(",") if v]
    return [
        r["scenario"], r["mode"], ",".join(viol) or "pass",
        f"{m['goodput_rps']:.2f}/s ({m['good']}/{m['requests']})",
        f"{m['ttft_ms']['p99']:.0f} ms" if m["ttft_ms"]["n"] else "-",
        pre, low, rec,
        f"{cap.get('stranded_slot_beyond_grace_s', 0):,.0f}",
        f"{cap.get('stranded_kv_page_beyond_grace_s', 0):,.0f}",
        f"{cap.get('peak_queued', 0):,}",
    ]


def overload_row(r):
    m = r["metrics"]
    o = m["overload"]
    viol = r.get("violated") or []
    rec = m.get("recovery") or {}
    return [
        r["scenario"], r["mode"], ",".join(viol) or "pass",
        f"{o['capacity_rps']:.1f}/s", f"{o['offered_rps']:.1f}/s ({o['offered_rps'] / o['capacity_rps']:.1f}x)"
        if o["capacity_rps"] else f"{o['offered_rps']:.1f}/s",
        f"{o['goodput_rps']:.1f}/s ({100 * o['goodput_share']:.0f} %)",
        f"{m['ttft_ms']['p99']:.0f} ms" if m["ttft_ms"]["n"] else "-",
        f"{o['shed']}", f"{o['shed_ms_p50']:.0f} / {o['shed_ms_p99']:.0f} ms" if o["shed"] else "-",
        recovery(rec)[2],
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=DEFAULT, help="scenario files (default: the cost rows)")
    ap.add_argument("--pdref", default="build/pdref", help="the pdref binary (default build/pdref)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    ap.add_argument("--overload", action="store_true",
                    help="the load-step table instead: capacity, offered, goodput in the step and "
                         "its share, shedding (rows whose run has a load step)")
    a = ap.parse_args()
    p = subprocess.run([a.pdref, "sim", "run", *a.files, "--mode", "all", "--json"],
                       capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.stderr.write(p.stderr)
        return 2
    doc = json.loads(p.stdout)
    all_rows = doc["rows"] if isinstance(doc, dict) else doc
    if a.overload:
        rows = [overload_row(r) for r in all_rows if "overload" in r.get("metrics", {})]
        head = ["scenario", "mode", "verdict", "capacity", "offered in the step",
                "goodput in the step (share)", "p99 TTFT", "shed", "shed p50 / p99",
                "recovered after"]
    else:
        rows = [row(r) for r in all_rows if "metrics" in r]
        head = ["scenario", "mode", "verdict", "goodput (good/all)", "p99 TTFT",
                "goodput before the burst", "lowest window", "recovered after",
                "slot-s held beyond grace", "KV page-s held beyond grace", "peak queued"]
    if a.json:
        print(json.dumps([dict(zip(head, r)) for r in rows], indent=1))
        return 0
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
