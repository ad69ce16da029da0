"""XProf's tools beyond the trace viewer on a real kiln capture
(tests/interop/check_xprof.sh; docs/profiling.md, "XProf's other tools").

  check_xprof.py RUN_DIR

Runs XProf's own converter (xprof.convert.raw_to_tool_data.
xspace_to_tool_data, what TensorBoard's profile plugin serves) on the
capture's *.xplane.pb and checks its figures against the capture's other
file, the Chrome trace (<host>.trace.json.gz, read here with the standard
library: an independent path through kiln's events):
  - overview_page: steps found (no "No step marker observed"), one row per
    step region of the trace inside the capture, each row's step time equal
    to that step's wall time in the trace (0.01 ms), the average step time
    of the page equal to their mean (0.05 ms: the page rounds to 0.1 ms);
  - framework_op_stats: every kernel of the trace is an operation, with as
    many occurrences as the trace has events of it and the same total time,
    named with the user's source line the trace gives it
    ("Forward/gemm_64x1024x784->s5_profile_step.c-194"), and kernels made
    on lines of the program (s5_profile_step.c) are among them;
  - memory_profile: every allocator of the trace's memory counters is a
    memory id, its peak in use (peak_stats.peak_bytes_in_use) is the largest
    sample of its counter (> 0) and its time the last sample at that value;
    the timeline (when XProf keeps every sample: 1000 or fewer) has the
    trace's samples, value for value.
Exit status 0 when every check passes; otherwise the differences and 1.
"""
import collections
import glob
import gzip
import json
import os
import re
import sys

failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL: " + msg)


def tool(paths, name):
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data(paths, name, {})
    if not data:
        print("FAIL: XProf's converter returned nothing for %s" % name)
        sys.exit(1)
    return json.loads(data)


def op_name(kernel, source=None):
    """kiln's framework-op name of a kernel made at source ("train.c:88")
    (src/profiler/xplane.c, tf_op_name)."""
    n = re.sub(r"[^A-Za-z0-9_./-]", "_", kernel)
    n = n if re.match(r"[A-Za-z0-9]", kernel) else "k" + n
    return n + ("->" + re.sub(r"[^A-Za-z0-9_./-]", "-", source) if source else "")


def check_memory(paths, counters):
    """The memory profile against the trace's counters {allocator: [(ts_us, bytes)]}."""
    check(len(counters) > 0, "the trace has no memory counters")
    prof = tool(paths, "memory_profile")
    per = prof.get("memoryProfilePerAllocator", {})
    ids = prof.get("memoryIds", [])
    for alloc, samples in counters.items():
        check(alloc in ids, "allocator %r is not among XProf's memory ids %s" % (alloc, ids))
        if alloc not in per:
            continue
        summ = per[alloc]["profileSummary"]
        peak = max(b for _, b in samples)
        got = int(summ["peakStats"]["peakBytesInUse"])
        check(peak > 0, "%s: the trace's peak in use is 0" % alloc)
        check(got == peak, "%s: peak in use %d bytes in XProf, %d in the trace" % (alloc, got, peak))
        t_peak = max(t for t, b in samples if b == peak)
        t_got = int(summ["peakStatsTimePs"]) / 1e6
        check(abs(t_got - t_peak) < 0.002, "%s: peak at %.3f us in XProf, %.3f us in the trace" % (alloc, t_got, t_peak))
        timeline = per[alloc].get("sampledTimelineSnapshots", [])
        if len(samples) <= 1000:
            got_v = sorted(int(s["aggregationStats"].get("heapAllocatedBytes", 0)) for s in timeline)
            check(got_v == sorted(b for _, b in samples),
                  "%s: XProf's timeline has %d samples, the trace %d (or their values differ)" % (alloc, len(timeline), len(samples)))
        print("check_xprof: memory %s: %d events, peak %d bytes" % (alloc, len(samples), got))


def main(run_dir):
    paths = sorted(glob.glob(os.path.join(run_dir, "*.xplane.pb")))
    traces = sorted(glob.glob(os.path.join(run_dir, "*.trace.json.gz")))
    if len(paths) != 1 or len(traces) != 1:
        print("FAIL: expected one capture in %s, found %s and %s" % (run_dir, paths, traces))
        sys.exit(1)
    with gzip.open(traces[0], "rt") as f:
        all_events = json.load(f)["traceEvents"]
    events = [e for e in all_events if e.get("ph") == "X"]
    counters = collections.defaultdict(list)
    for e in all_events:
        if e.get("ph") == "C" and e.get("cat") == "memory":
            counters[e["name"]].append((e["ts"], e["args"]["in_use_bytes"]))
    end = max(e["ts"] + e["dur"] for e in events)
    steps = {}
    for e in events:
        if e["cat"] == "step" and e["ts"] > 0 and e["ts"] + e["dur"] < end:  # whole steps only
            steps["%s %d" % (e["name"], e["args"]["step_num"])] = e["dur"] / 1000.0
    check(len(steps) >= 5, "the capture has %d whole steps; the check needs 5 or more" % len(steps))

    page = tool(paths, "overview_page")
    text = json.dumps(page)
    check("No step marker observed" not in text, "the Overview Page says: No step marker observed")
    table = next(t for t in page if t.get("cols") and t["cols"][0]["id"] == "stepnum")
    cols = [c["id"] for c in table["cols"]]
    rows = {r["c"][0]["v"]: r["c"][cols.index("stepTimeMs")]["v"] for r in table["rows"]}
    # XProf may drop the first and last steps of a capture as incomplete
    missing = [s for s in steps if s not in rows]
    check(len(missing) <= 2, "steps of the trace missing from the Overview Page: %s" % missing[:5])
    for s, ms in rows.items():
        check(s in steps, "the Overview Page has step %r, which is no whole step of the trace" % s)
        if s in steps:
            check(abs(ms - steps[s]) < 0.01, "step %s: Overview Page %.3f ms, trace %.3f ms" % (s, ms, steps[s]))
    shown = [steps[s] for s in rows if s in steps]
    avg = float(table["p"]["steptime_ms_average"])
    if shown:
        mean = sum(shown) / len(shown)
        check(abs(avg - mean) <= 0.05 + 1e-9, "average step time: Overview Page %.1f ms, trace %.3f ms" % (avg, mean))
        check(avg > 0, "the Overview Page's average step time is 0")

    kern = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e["cat"] == "kernel":
            k = kern[op_name(e["name"], e["args"].get("source"))]
            k[0] += 1
            k[1] += e["dur"]
    ops = tool(paths, "framework_op_stats")[0]
    ocols = [c["id"] for c in ops["cols"]]
    got = {}
    for r in ops["rows"]:
        v = [c.get("v") for c in r["c"]]
        got[v[ocols.index("operation")]] = (v[ocols.index("occurrences")], v[ocols.index("total_time")])
    check(len(kern) > 0, "the trace has no kernels")
    for name, (n, us) in kern.items():
        check(name in got, "kernel %s is not among XProf's operations" % name)
        if name in got:
            check(got[name][0] == n, "%s: %s occurrences in XProf, %d in the trace" % (name, got[name][0], n))
            check(abs(got[name][1] - us) <= 0.01 * us + 1, "%s: %.1f us in XProf, %.1f in the trace" % (name, got[name][1], us))
    own = [n for n in got if "->s5_profile_step.c-" in n]
    check(len(own) > 0, "no operation names a line of s5_profile_step.c: %s" % list(got)[:5])
    print("check_xprof: %d steps (average %.1f ms), %d operations checked, %d on the program's lines (%s)"
          % (len(rows), avg, len(kern), len(own), own[0] if own else "-"))
    check_memory(paths, counters)
    if failures:
        sys.exit(1)
    print("check_xprof: OK")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1])
