"""Interop check between kiln's profiler and TensorBoard's profile plugin
(driven by tests/interop/check_profile.sh; see docs/profiling.md).

  check_profile.py convert RUN_DIR
      Loads every *.xplane.pb of RUN_DIR through the plugin's own converter
      (xprof.convert.raw_to_tool_data.xspace_to_tool_data, the code behind
      the trace viewer) and checks that the user's annotations, the step
      markers and kiln's kernels are in the converted trace.

  check_profile.py capture LOGDIR SERVICE_ADDR [--screenshot PNG]
      Starts TensorBoard on loopback in LOGDIR's parent directory with the
      relative --logdir basename(LOGDIR), as docs/profiling.md does (the
      traced program must run in that directory too: TensorBoard sends the
      relative path, the server resolves it against its own working
      directory), sends the request of its "Capture Profile" dialog
      (GET /data/plugin/profile/capture_profile) for the kiln profiler server
      at SERVICE_ADDR, and checks that a new run appears in the plugin's run
      list and converts. Then a capture the server refuses (a duration over
      its 10-minute limit): TensorBoard must answer with an error, and the
      server's reason must be in TensorBoard's log, where its client puts it.
      With --screenshot, photographs the trace viewer of that run with
      headless Chromium.

Exit status 0 when every check passes; a failed check prints what was
expected and what was found, and exits 1.
"""
import glob
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def converted_events(run_dir):
    from xprof.convert import raw_to_tool_data

    paths = sorted(glob.glob(os.path.join(run_dir, "*.xplane.pb")))
    if not paths:
        fail("no *.xplane.pb in %s" % run_dir)
    data, content_type = raw_to_tool_data.xspace_to_tool_data(paths, "trace_viewer", {})
    if not data:
        fail("the plugin's converter returned no trace_viewer data for %s" % paths)
    trace = json.loads(data)
    return paths, trace


def check_trace(run_dir):
    paths, trace = converted_events(run_dir)
    events = trace.get("traceEvents", [])
    names = {}
    for e in events:
        if e.get("ph") == "X":
            names[e.get("name", "")] = names.get(e.get("name", ""), 0) + 1
    # Process and thread names the converter derived from the XPlanes/XLines.
    pnames = {e["pid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "process_name" and "args" in e}
    tnames = [e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name" and "args" in e]
    print("converted %s: %d events, %d distinct names" % (", ".join(os.path.basename(p) for p in paths),
                                                         len(events), len(names)))
    print("  processes: %s" % sorted(set(pnames.values())))
    print("  threads:   %s" % sorted(set(tnames))[:12])
    for want in ("Training_Step", "Forward", "Backward", "FINISH_UPDATE"):
        n = sum(c for k, c in names.items() if k == want or k.startswith(want + " ") or k.startswith(want + ":"))
        if n == 0:
            fail("annotation %r not in the converted trace (names: %s)" % (want, sorted(names)[:40]))
        print("  %-14s %d events" % (want, n))
    steps = sum(c for k, c in names.items() if k.startswith("Training_Step"))
    if steps < 2:
        fail("expected at least 2 Training_Step events, found %d" % steps)
    # Kernels: kiln names each fused kernel "<region>/fusion.N (ops)" and each
    # GEMM "<region>/gemm MxNxK"; they must sit on a device lane, and carry
    # the annotation that traced them.
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and "args" in e}
    # The host lines "Ops lane N" repeat every kernel as a framework op
    # ("Forward/gemm_64x1024x784:Gemm", docs/profiling.md section 8): not kernels.
    kernels = [e for e in events if e.get("ph") == "X" and
               ("/fusion." in e.get("name", "") or "/gemm " in e.get("name", "")) and
               not tname.get((e.get("pid"), e.get("tid")), "").startswith("Ops lane ")]
    if not kernels:
        fail("no kernel events (\"<region>/fusion.N\" or \"<region>/gemm\") in the converted trace")
    off_device = [e for e in kernels if "device" not in pnames.get(e.get("pid"), "")]
    if off_device:
        fail("kernel %r is not on a device lane (process %r)" % (off_device[0]["name"],
                                                               pnames.get(off_device[0].get("pid"))))
    for region in ("Forward", "Backward"):
        if not any(e["name"].startswith(region + "/") for e in kernels):
            fail("no kernel carries the annotation %r that traced it" % region)
    print("  kernels:   %d events on %s, e.g. %s" % (
        len(kernels), sorted({pnames[e["pid"]] for e in kernels}), sorted({e["name"] for e in kernels})[:3]))
    # Steps: the plugin derives a "Steps" line from kiln's step markers.
    step_events = [e for e in events if e.get("ph") == "X" and tname.get((e.get("pid"), e.get("tid"))) == "Steps"]
    if len(step_events) < 2:
        fail("the plugin derived %d step(s) from the capture (\"Steps\" line); expected at least 2"
             % len(step_events))
    print("  steps:     %d on the plugin's \"Steps\" line" % len(step_events))
    return trace


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=120):
    """(status, body), for error statuses too: the plugin explains a failed
    capture in the JSON body of a 500."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    if body[:2] == b"\x1f\x8b":  # TensorBoard gzips JSON replies
        body = gzip.decompress(body)
    return status, body


def run_dirs(logdir):
    return set(glob.glob(os.path.join(logdir, "plugins", "profile", "*")))


def screenshot(url, png):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not chromium:
        fail("--screenshot needs chromium (apt-get install chromium)")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--window-size=1600,1000", "--virtual-time-budget=30000", "--screenshot=" + png, url]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180)
    if not os.path.exists(png) or os.path.getsize(png) < 10000:
        fail("chromium wrote no usable screenshot at %s" % png)
    print("screenshot: %s (%d bytes)" % (png, os.path.getsize(png)))


def check_capture(logdir, service_addr, png=None):
    tb = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    port = free_port()
    before = run_dirs(logdir)
    log_path = logdir.rstrip("/") + ".tensorboard.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([tb, "--logdir", os.path.basename(logdir.rstrip("/")), "--host", "127.0.0.1",
                             "--port", str(port)],
                            cwd=os.path.dirname(logdir.rstrip("/")), stdout=subprocess.DEVNULL, stderr=log)
    base = "http://127.0.0.1:%d" % port
    try:
        for _ in range(120):
            try:
                status, _ = http_get(base + "/data/plugins_listing", timeout=5)
                if status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            fail("TensorBoard did not come up on %s" % base)
        reply = tb_capture(base, service_addr, 500)
        print("TensorBoard capture_profile -> %s" % reply)
        if "error" in reply:
            fail("TensorBoard's capture against %s failed: %s" % (service_addr, reply["error"]))
        new = sorted(run_dirs(logdir) - before)
        if len(new) != 1:
            fail("expected one new run under %s/plugins/profile, found %s" % (logdir, new))
        run = os.path.basename(new[0])
        print("new run: %s (%s)" % (run, ", ".join(sorted(os.listdir(new[0])))))
        status, body = http_get(base + "/data/plugin/profile/runs")
        runs = json.loads(body)
        if not any(run in r for r in runs):
            fail("run %s not in the plugin's run list %s" % (run, runs))
        print("plugin run list: %s" % runs)
        check_trace(new[0])
        if png:
            # The plugin's own page, on the trace viewer of the new run.
            status, body = http_get(base + "/data/plugin/profile/hosts?" +
                                    urllib.parse.urlencode({"run": run, "tag": "trace_viewer@"}))
            host = json.loads(body)[0]["hostname"]
            url = "%s/data/plugin/profile/index.html?%s" % (
                base, urllib.parse.urlencode({"run": run, "tag": "trace_viewer@", "host": host}))
            screenshot(url, png)
        check_refusal(base, service_addr, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def tb_capture(base, service_addr, duration_ms):
    """The request the "Capture Profile" dialog sends; TensorBoard's JSON reply."""
    q = urllib.parse.urlencode({"service_addr": service_addr, "is_tpu_name": "false", "duration": str(duration_ms),
                                "num_retry": "0", "worker_list": "", "host_tracer_level": "2",
                                "device_tracer_level": "1", "python_tracer_level": "0", "delay": "0"})
    status, body = http_get(base + "/data/plugin/profile/capture_profile?" + q)
    return json.loads(body)


def check_refusal(base, service_addr, log_path):
    """A request kiln refuses: TensorBoard's page gets an error, and the
    server's reason reaches TensorBoard's log (its client logs each server's
    error there; the page only says that no trace was collected)."""
    reply = tb_capture(base, service_addr, 700000)
    print("TensorBoard capture_profile (700000 ms) -> %s" % reply)
    if "error" not in reply:
        fail("a 700000 ms capture (over kiln's 600000 ms limit) did not fail: %s" % reply)
    want = "ProfileRequest.duration_ms 700000 is outside 1..600000"
    for _ in range(50):  # the log line may trail the HTTP reply
        with open(log_path) as f:
            lines = [l.rstrip() for l in f if want in l]
        if lines:
            break
        time.sleep(0.1)
    else:
        fail("the server's reason (%r) is not in TensorBoard's log %s" % (want, log_path))
    print("TensorBoard's log: %s" % lines[0])


def main(argv):
    if len(argv) >= 2 and argv[0] == "convert":
        check_trace(argv[1])
    elif len(argv) >= 3 and argv[0] == "capture":
        png = argv[argv.index("--screenshot") + 1] if "--screenshot" in argv else None
        check_capture(argv[1], argv[2], png)
    else:
        print(__doc__)
        return 2
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
