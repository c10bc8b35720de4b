"""The CPU the client and the broker spent on a run: the real-broker harness's ``cpu.json``.

``{"broker_cpu_s": s, "driver_cpu_s_in_window": s, "nproc": n, ...}``: the broker's CPU seconds over the
run (``/proc/<pid>/stat``), the driver JVM's own (``OperatingSystemMXBean.getProcessCpuTime`` over the
schedule and its drain) and the host's processors; the harness runs the broker and the driver on the
same host, so ``nproc`` is the processors they share.
"""

from __future__ import annotations

from rocketsim.calibration.measurements import CpuUse, Measurements
from rocketsim.calibration.reading import fail, json_key_line, load_json, number

CLIENT_KEYS = ("driver_cpu_s_in_window", "driver_cpu_s", "client_cpu_s")


def parse_cpu_json(text: str, source: str) -> Measurements:
    """The client's and the broker's CPU seconds, and the processors of the host they shared."""
    doc = load_json(text, source, 'the CPU of a run (JSON {"broker_cpu_s": s, "driver_cpu_s_in_window": s})')
    if not isinstance(doc, dict) or "broker_cpu_s" not in doc:
        fail(source, 1, 'expected a JSON object with "broker_cpu_s" and "driver_cpu_s_in_window"')
    key = next((k for k in CLIENT_KEYS if k in doc), None)
    if key is None:
        fail(source, 1, f"expected the client's CPU seconds as one of {', '.join(CLIENT_KEYS)}")
    client = number(doc[key], source, json_key_line(text, key), "the client's CPU seconds > 0", minimum=1e-9)
    line = json_key_line(text, "broker_cpu_s")
    broker = number(doc["broker_cpu_s"], source, line, "the broker's CPU seconds > 0", minimum=1e-9)
    nproc = doc.get("nproc")
    processors = None
    if nproc is not None:
        processors = int(number(nproc, source, json_key_line(text, "nproc"), "nproc >= 1", minimum=1))
    note = f"{key} and broker_cpu_s" + (f" on one host of {processors} processors" if processors else "")
    return Measurements(cpu=(CpuUse(source, client, broker, processors, note=note),))
