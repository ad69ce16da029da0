#!/usr/bin/env python3
"""Check a kiln-written TensorBoard event file with TensorBoard's own reader.

Usage: check_tfevents.py LOGDIR
LOGDIR holds exactly one events.out.tfevents.* file, written by
tests/unit/test_tfevents.c (round_trip_interop_series) with
KILN_TFEVENTS_OUT=LOGDIR. Normally run through check_tfevents.sh.

Two independent checks, both with TensorBoard code (no TensorFlow needed):
  1. strict: TensorBoard's TFRecord reader (which verifies both masked
     CRC-32Cs of every record) and its tensorflow.Event protobuf class
     decode every record; the first is the "brain.Event:2" version record;
  2. EventAccumulator, what `tensorboard --logdir` uses: the scalar tags,
     steps and values are exactly the series the C test logs (keep
     EXPECTED in sync with interop_series() in test_tfevents.c).
Exits non-zero with a message on the first mismatch.
"""
import glob
import math
import os
import struct
import sys
import time

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow

STEPS = 20
BIG_STEP = 1000000000000


def f32(x):
    """x rounded to float32, as kiln stores simple_value."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected():
    series = {"train/loss": [], "train/accuracy": [], "eval/\u00fcn\u00efc\u00f8de": []}
    for s in range(STEPS):
        series["train/loss"].append((s, f32(2.5 * math.exp(-0.1 * s))))
        series["train/accuracy"].append((s, f32(s / 20.0)))
        series["eval/\u00fcn\u00efc\u00f8de"].append((s, f32(-1.5 + 0.25 * s)))
    series["special/nan"] = [(BIG_STEP, math.nan)]
    series["special/inf"] = [(BIG_STEP, -math.inf)]
    return series


def fail(msg):
    print("check_tfevents: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def same(a, b):
    if math.isnan(b):
        return math.isnan(a)
    if math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))  # 1 ulp of slack for libm exp


def strict_read(path):
    reader = pywrap_tensorflow.PyRecordReader_New(path)
    events = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            break
        except errors.DataLossError as e:  # bad CRC or truncated record
            fail("%s: record %d: %s" % (path, len(events), e))
        ev = event_pb2.Event()
        ev.ParseFromString(reader.record())
        events.append(ev)
    return events


def main():
    if len(sys.argv) != 2:
        fail("usage: check_tfevents.py LOGDIR")
    logdir = sys.argv[1]
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    if len(files) != 1:
        fail("%s: expected one event file, found %r" % (logdir, files))
    path = files[0]
    want = expected()
    n_values = sum(len(v) for v in want.values())

    # 1. every record, strictly
    events = strict_read(path)
    if len(events) != 1 + n_values:
        fail("%d records, want %d" % (len(events), 1 + n_values))
    if events[0].file_version != "brain.Event:2":
        fail("first record file_version %r" % events[0].file_version)
    mtime = os.path.getmtime(path)
    for ev in events:
        if not (mtime - 3600 < ev.wall_time <= time.time() + 1):
            fail("wall_time %r is not around the file's mtime %r" % (ev.wall_time, mtime))
    for ev in events[1:]:
        if len(ev.summary.value) != 1 or ev.summary.value[0].WhichOneof("value") != "simple_value":
            fail("record is not one simple_value: %r" % ev)

    # 2. what TensorBoard shows
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = sorted(acc.Tags()[event_accumulator.SCALARS])
    if tags != sorted(want):
        fail("scalar tags %r, want %r" % (tags, sorted(want)))
    for tag, series in want.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if len(got) != len(series):
            fail("%s: %d points, want %d" % (tag, len(got), len(series)))
        for (gs, gv), (ws, wv) in zip(got, series):
            if gs != ws or not same(gv, wv):
                fail("%s: got (step %d, %r), want (step %d, %r)" % (tag, gs, gv, ws, wv))
    print("check_tfevents: OK: %s: %d records, %d tags, steps and values match (tensorboard %s)"
          % (os.path.basename(path), len(events), len(tags), __import__("tensorboard").__version__))


if __name__ == "__main__":
    main()
