"""The self-contained HTML page of `pgle report`: inline CSS and SVG, no script, no network.

Plots are drawn here as SVG (a strip plot per phase, bars for exposed communication and
memory) because the page must open offline and from a file; no plotting library is a
dependency of pgle.
"""

from __future__ import annotations

import html
import json
import statistics
from typing import Any

from pgle.units import human_bytes

COLORS = ("#1f77b4", "#d62728")
CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px;
font-size:.9em;text-align:left}th{background:#f4f4f4}.why{color:#8a6d3b;background:#fcf8e3;
padding:6px 10px;border-radius:4px}.flag{color:#a94442;font-weight:bold}.ok{color:#3c763d}
code{font-size:.85em}svg{background:#fafafa;border:1px solid #eee}"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.3f} ms"


def _ps_ms(ps: float | None) -> str:
    return "-" if ps is None else f"{ps / 1e9:.3f} ms"


def _bytes(b: float | None) -> str:
    return "-" if b is None else human_bytes(b)


def _why(text: str | None) -> str:
    return f'<p class="why">{_e(text)}</p>' if text else ""


def _table(head: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def _svg(label: str, w: int, h: int) -> str:
    return (
        f'<svg role="img" aria-label="{_e(label)}" width="{w}" height="{h}" '
        'xmlns="http://www.w3.org/2000/svg">'
    )


def strip_plot(series: list[tuple[str, list[float]]]) -> str:
    """One row of dots per series (seconds), with its median marked: the spread at a glance."""
    values = [v for _, vs in series for v in vs]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    w, left, row_h = 760, 150, 40
    h = row_h * len(series) + 40

    def x(v):
        return left + (v - lo) / (hi - lo) * (w - left - 20)

    parts = [_svg("step time distribution", w, h)]
    for i, (label, vs) in enumerate(series):
        y = 25 + i * row_h
        c = COLORS[i % len(COLORS)]
        parts.append(f'<text x="5" y="{y + 4}" font-size="12">{_e(label)}</text>')
        for v in vs:
            parts.append(f'<circle cx="{x(v):.1f}" cy="{y}" r="3" fill="{c}" fill-opacity="0.6"/>')
        if vs:
            med = statistics.median(vs)
            parts.append(
                f'<line x1="{x(med):.1f}" x2="{x(med):.1f}" y1="{y - 12}" y2="{y + 12}" '
                f'stroke="{c}" stroke-width="2"/>'
            )
    for k in range(5):
        v = lo + k * (hi - lo) / 4
        parts.append(
            f'<text x="{x(v):.1f}" y="{h - 5}" font-size="10" text-anchor="middle">'
            f"{v * 1e3:.2f} ms</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    groups: list[str], series: list[tuple[str, list[float | None]]], fmt, label: str
) -> str:
    """Grouped horizontal bars: one group per row (a step, a module), one bar per series."""
    values = [v for _, vs in series for v in vs if v is not None]
    if not values or not groups:
        return ""
    top = max(values) or 1.0
    w, left, bar_h = 760, 180, 12
    group_h = bar_h * len(series) + 8
    h = group_h * len(groups) + 30
    parts = [_svg(label, w, h)]
    for i, g in enumerate(groups):
        y0 = 10 + i * group_h
        parts.append(f'<text x="5" y="{y0 + bar_h}" font-size="11">{_e(g)[:28]}</text>')
        for j, (name, vs) in enumerate(series):
            v = vs[i] if i < len(vs) else None
            if v is None:
                continue
            bw = max(v / top * (w - left - 120), 0.5)
            y = y0 + j * bar_h
            parts.append(
                f'<rect x="{left}" y="{y}" width="{bw:.1f}" height="{bar_h - 2}" '
                f'fill="{COLORS[j % len(COLORS)]}"><title>{_e(name)}: {_e(fmt(v))}</title></rect>'
            )
            parts.append(
                f'<text x="{left + bw + 4:.1f}" y="{y + bar_h - 3}" font-size="10">'
                f"{_e(fmt(v))}</text>"
            )
    legend = " ".join(
        f'<tspan fill="{COLORS[j % len(COLORS)]}">&#9632; {_e(n)}</tspan>'
        for j, (n, _) in enumerate(series)
    )
    parts.append(f'<text x="{left}" y="{h - 5}" font-size="11">{legend}</text></svg>')
    return "".join(parts)


def _section(id_: str, title: str, body: str) -> str:
    return f'<section id="{id_}"><h2>{_e(title)}</h2>{body}</section>'


def _steps(data) -> str:
    phases = data["phases"]
    body = strip_plot([(p["label"], p["step_times_s"]) for p in phases])
    rows = []
    for p in phases:
        st = p["step_time"] or {}
        rows.append(
            [
                p["label"],
                st.get("count"),
                _ms(st.get("median_s")),
                _ms(st.get("p25_s")),
                _ms(st.get("p75_s")),
                _ms(st.get("min_s")),
                _ms(st.get("max_s")),
                p["profiled_steps_excluded"] or "-",
            ]
        )
    body += _table(
        ["phase", "steps", "median", "p25", "p75", "min", "max", "left out (compile, profiled)"],
        rows,
    )
    if data.get("tune_lines"):
        # What `pgle tune` printed, word for word: the same numbers as its JSON.
        body += "<p>pgle tune said:</p><pre>" + _e("\n".join(data["tune_lines"])) + "</pre>"
    r = data.get("step_ratio")
    cmp = data.get("comparison")
    if r and cmp:
        verdict = (
            '<span class="ok">beyond run-to-run noise</span>'
            if r["beyond_noise"]
            else "within run-to-run noise"
        )
        body += (
            f"<p>Median step ratio ({_e(cmp['after'])} / {_e(cmp['before'])}): "
            f"<b>{r['ratio']:.3f}</b>, {int(r['confidence'] * 100)} % bootstrap interval "
            f"{r['low']:.3f} to {r['high']:.3f}: {verdict}.</p>"
        )
    elif data.get("step_ratio_why") and not data.get("tune_lines"):
        body += _why(data["step_ratio_why"])
    hows = dict.fromkeys((p.get("steps") or {}).get("how") for p in phases)
    body += "".join(f"<p>Steps: {_e(h)}.</p>" for h in hows if h)
    if any(p["role"] == "collect" for p in phases):
        body += (
            "<p>The collect phase ran with the profiler on"
            + (
                f" ({_e('; '.join(data['collect_changed']))})"
                if data.get("collect_changed")
                else ""
            )
            + ": it is shown, never compared.</p>"
        )
    if not any(p["step_times_s"] for p in phases):
        body += _why(
            "no step times: the workload marks no steps "
            "(jax.profiler.StepTraceAnnotation) and no jitted function executed 3 "
            "times or more"
        )
    return _section("step-time", "Step time", body)


def _throughput(data) -> str:
    rows, whys = [], []
    # A rate only where some phase ran on a device of known peak (issue 33: no TFLOP/s on CPU).
    rated = any(p["throughput"].get("achieved_tflops") is not None for p in data["phases"])
    for p in data["phases"]:
        t = p["throughput"]
        mod = p.get("step_module") or {}
        row = [
            p["label"],
            mod.get("module"),
            f"{t['flops_per_step']:.4g}" if t.get("flops_per_step") else "-",
        ]
        if rated:
            row.append(
                f"{t['achieved_tflops']:.4g}" if t.get("achieved_tflops") is not None else "-"
            )
        row.append(p.get("device_kind"))
        if rated:
            row.append(f"{t['mfu'] * 100:.2f} %" if t.get("mfu") is not None else "-")
        rows.append(row)
        if t.get("why_no_mfu"):
            what = "MFU" if t.get("achieved_tflops") is not None else "TFLOP/s and MFU"
            whys.append(f"{p['label']}: {what} not computed: {t['why_no_mfu']}")
    head = ["phase", "step module", "FLOPs per step per device (XLA cost analysis)"]
    if rated:
        head.append("achieved TFLOP/s per device")
    head.append("device")
    if rated:
        head.append(f"MFU ({data['phases'][0]['throughput']['dtype']})")
    body = _table(head, rows)
    body += "".join(_why(w) for w in whys)
    body += "".join(
        _why(f"{p['label']}: no step module: {p['why_no_step_module']}")
        for p in data["phases"]
        if p.get("why_no_step_module")
    )
    peaks = [p["throughput"].get("peak") for p in data["phases"] if p["throughput"].get("peak")]
    if peaks:
        pk = peaks[0]
        body += (
            f"<p>Peak used: {_e(pk['device'])} {_e(json.dumps(pk['tflops']))} dense TFLOP/s; "
            f"source: {_e(pk['source'])}.</p>"
        )
    return _section("throughput", "Throughput and MFU", body)


def _communication(data) -> str:
    body = ""
    phases = data["phases"]
    with_comm = [p for p in phases if p.get("communication")]
    for p in phases:
        if not p.get("communication"):
            body += _why(f"{p['label']}: no communication analysis: {p.get('communication_why')}")
        elif p.get("communication_why"):
            body += _why(f"{p['label']}: {p['communication_why']}")
    if with_comm:
        rows = []
        for p in with_comm:
            c = p["communication"]
            n = max(c["device_planes"], 1)
            rows.append(
                [
                    p["label"],
                    c["device_planes"],
                    c["collectives"],
                    _ps_ms(c["span_ps"] / n),
                    _ps_ms(c["hidden_ps"] / n),
                    _ps_ms(c["exposed_ps"] / n),
                    f"{c['hidden_fraction'] * 100:.1f} %"
                    if c["hidden_fraction"] is not None
                    else "-",
                    ", ".join(c["window_source"]),
                ]
            )
        body += _table(
            [
                "phase",
                "devices",
                "collective executions",
                "communication per device",
                "hidden",
                "exposed",
                "hidden share",
                "from",
            ],
            rows,
        )
        steps = sorted({s["step"] for p in with_comm for s in p["communication"]["per_step"]})
        series = [
            (
                p["label"],
                [
                    next(
                        (s["exposed_ps"] for s in p["communication"]["per_step"] if s["step"] == k),
                        None,
                    )
                    for k in steps
                ],
            )
            for p in with_comm
        ]
        body += "<h3>Exposed communication per step (per device)</h3>"
        body += bar_chart(
            [f"step {k}" for k in steps], series, _ps_ms, "exposed communication per step"
        )
        change = data.get("communication_change")
        cmp = data.get("comparison")
        if change and cmp:
            body += (
                f"<h3>Per collective, before ({_e(cmp['before'])}) and after "
                f"({_e(cmp['after'])}), per device</h3>"
            )
            body += _table(
                [
                    "HLO op",
                    "module",
                    "exposed before",
                    "hidden before",
                    "exposed after",
                    "hidden after",
                ],
                [
                    [
                        c["op"],
                        c["module"],
                        _ps_ms(c.get("before_exposed_ps")),
                        _ps_ms(c.get("before_hidden_ps")),
                        _ps_ms(c.get("after_exposed_ps")),
                        _ps_ms(c.get("after_hidden_ps")),
                    ]
                    for c in change[:40]
                ],
            )
        elif data.get("communication_change_why"):
            body += _why(f"before/after per collective: {data['communication_change_why']}")
        for p in with_comm:
            top = p["communication"]["top_exposed"]
            if top:
                body += f"<h3>Top exposed collectives: {_e(p['label'])}</h3>"
                body += _table(
                    ["HLO op", "module", "executions", "time", "exposed"],
                    [
                        [
                            t["op"],
                            t["module"],
                            t["count"],
                            _ps_ms(t["span_ps"]),
                            _ps_ms(t["exposed_ps"]),
                        ]
                        for t in top
                    ],
                )
    return _section("communication", "Exposed vs hidden communication", body)


def _schedule(data) -> str:
    s = data.get("schedule")
    if not s:
        return _section("schedule", "Schedule change", _why(data.get("schedule_why")))
    body = (
        f"<p>{s['moved_count']} of {s['pair_count']} async pairs changed: "
        f"{s['more_overlap']} overlap more work with the profile, {s['less_overlap']} less.</p>"
    )
    rows = []
    for r in s["pairs"]:
        mark = '<span class="flag">moved</span>' if r["moved"] else "same"

        def lst(v):
            return "-" if v is None else (", ".join(_e(x) for x in v) or "(nothing)")

        rows.append(
            [
                _e(r["start"]),
                _e(r["kind"]),
                _e(r["computation"]),
                lst(r["before"]),
                lst(r["after"]),
                mark,
            ]
        )
    body += _table(
        [
            "async start",
            "kind",
            "computation",
            "between start and done: without profile",
            "with profile",
            "",
        ],
        rows,
        raw=True,
    )
    before, after = _e(s.get("before_file")), _e(s.get("after_file"))
    body += f"<p>From <code>{before}</code> and <code>{after}</code>.</p>"
    return _section("schedule", "Schedule change", body)


def _memory(data) -> str:
    rows = data.get("memory") or []
    if not rows:
        return _section("memory", "Peak memory", _why("no module memory recorded"))
    top = rows[:12]
    cmp = data.get("comparison")
    labels = [cmp["before"], cmp["after"]] if cmp else [data["phases"][-1]["label"]]
    series = [(labels[0], [r["before_bytes"] for r in top])]
    if len(labels) > 1:
        series.append((labels[1], [r["after_bytes"] for r in top]))
    body = bar_chart([r["module"] for r in top], series, _bytes, "peak memory per module")
    if not cmp:
        body += _table(
            ["module", "peak", "temp"],
            [[r["module"], _bytes(r["before_bytes"]), _bytes(r["temp_before_bytes"])] for r in top],
        )
        return _section("memory", "Peak memory (XLA memory analysis)", body)
    body += _table(
        ["module", "peak without", "peak with", "temp without", "temp with", "growth"],
        [
            [
                _e(r["module"]),
                _bytes(r["before_bytes"]),
                _bytes(r["after_bytes"]),
                _bytes(r["temp_before_bytes"]),
                _bytes(r["temp_after_bytes"]),
                ('<span class="flag">+%.1f %%</span>' % (r["growth"] * 100))
                if r["flagged"]
                else ("-" if r["growth"] is None else "%+.1f %%" % (r["growth"] * 100)),
            ]
            for r in top
        ],
        raw=True,
    )
    return _section("memory", "Peak memory (XLA memory analysis)", body)


def _diagnostics(data) -> str:
    body = ""
    for p in data["phases"]:
        body += f"<h3>{_e(p['label'])}</h3>"
        rec = p["recompilations"]
        if rec:
            body += (
                '<p class="flag">Recompilation after warm-up (unstable shapes or retracing):</p>'
            )
            body += _table(
                ["function", "compilations", "seconds"],
                [[r["function"], r["count"], f"{r['seconds']:.3f}"] for r in rec],
            )
        else:
            body += "<p>No recompilation after warm-up.</p>"
        d = p.get("trace_diagnostics")
        if not d:
            body += _why(f"no trace diagnostics: {p.get('trace_diagnostics_why')}")
            continue
        frac = d["idle_fraction"]
        body += (
            f"<p>Device idle between kernels (gaps over {_ps_ms(d['idle_threshold_ps'])}): "
            f"{_ps_ms(d['idle_ps'])}"
            + (f" ({frac * 100:.1f} % of the device time)" if frac is not None else "")
            + f", {d['gaps_between_steps']} gaps span a step boundary (host-bound input?).</p>"
        )
        if d["largest_gaps"]:
            body += _table(
                ["device", "gap", "between steps"],
                [
                    [g["device"], _ps_ms(g["gap_ps"]), "yes" if g["between_steps"] else "no"]
                    for g in d["largest_gaps"]
                ],
            )
        if d["host_copies"]:
            body += '<p class="flag">Host/device copies inside the profiled steps:</p>'
            body += _table(
                ["direction", "copies", "per step", "time"],
                [
                    [k, v["count"], f"{v['per_step']:.1f}", _ps_ms(v["time_ps"])]
                    for k, v in d["host_copies"].items()
                ],
            )
        else:
            body += "<p>No host/device copies inside the profiled steps.</p>"
    return _section("diagnostics", "Diagnostics that defeat PGLE", body)


def _verdict(data) -> str:
    """The truth first: status, reason, what to do."""
    v = data["verdict"]
    body = (
        f'<p class="verdict">Verdict: <b>{_e(v["status"])}</b></p>'
        + "".join(f"<p>{_e(r)}</p>" for r in v["reasons"])
        + f"<p><b>What to do:</b> {_e(v['what_to_do'])}</p>"
    )
    return _section("verdict", "Verdict", body)


def _compare(data) -> str:
    """`tune --compare`: one row per arm (the same numbers as the terminal table)."""
    t = data.get("compare")
    if not t:
        return ""
    pred = t.get("predicted")
    column = pred is not None and not pred.get("why")
    rows = []
    for r in t["arms"]:
        ci = r.get("interval")
        ratio = (
            f"{ci['ratio']:.3f} ({ci['low']:.3f}..{ci['high']:.3f})"
            if ci
            else "1 (baseline)"
            if r["arm"] == t["baseline"]
            else ("needs a GPU" if not t["gpu"] else (r.get("why_no_ratio") or "-"))
        )
        comm = r.get("communication")
        st = r.get("step_time")
        rows.append(
            [
                r["arm"],
                r["describe"],
                r.get("status") or "-",
                f"{st['median_s'] * 1e3:.2f} ms" if st else "-",
                ratio,
                *([_predicted(r.get("predicted_ratio"))] if column else []),
                f"{comm['exposed_ms_per_device']:.3f} ms"
                if comm
                else ("needs a GPU" if not t["gpu"] else "-"),
                _bytes(r.get("peak_bytes")),
                f"{r['compile_s']:.2f} s" if r.get("compile_s") is not None else "-",
            ]
        )
    body = _table(
        [
            "arm",
            "what differs from default",
            "verdict",
            "median step",
            "ratio vs default (95 % interval)",
            *(["predicted ratio (pgle estimate)"] if column else []),
            "exposed communication per device",
            "step module peak memory",
            "compile time",
        ],
        rows,
    )
    if pred is not None and pred.get("line"):
        body += f"<p>{_e(pred['line'])}</p>"
    body += _why(t.get("caveat"))
    return _section("compare", "PGLE, O1/SoL, or nothing?", body)


def _predicted(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}"


def _compile_section(data) -> str:
    c = data.get("compile") or {}
    rows = []
    cmp = data.get("comparison")
    for key, label in (("before", cmp and cmp["before"]), ("after", cmp and cmp["after"])):
        x = c.get(key)
        if x:
            kinds = x.get("by_kind") or {}
            rows.append(
                [
                    label or data["phases"][-1]["label"],
                    x["count"],
                    f"{x['total_s']:.3f} s",
                    "-" if x.get("step_module_s") is None else f"{x['step_module_s']:.3f} s",
                    *(
                        f"{kinds[k]['count']} in {kinds[k]['seconds']:.3f} s" if k in kinds else "-"
                        for k in ("compiled", "cached")
                    ),
                ]
            )
    if not rows:
        return _section("compile", "Compile time", _why("no compile recorded"))
    return _section(
        "compile",
        "Compile time (with and without the profile)",
        _table(
            [
                "run",
                "compilations",
                "total",
                "step module",
                "compiled by XLA",
                "loaded from jax's persistent cache",
            ],
            rows,
        ),
    )


def render(data: dict[str, Any]) -> str:
    phases = data["phases"]
    head = _table(
        ["phase", "folder", "platform", "device"],
        [[p["label"], p["folder"], p["platform"], p["device_kind"]] for p in phases],
    )
    sections = [
        _verdict(data),
        _compare(data),
        _steps(data),
        _throughput(data),
        _communication(data),
        _schedule(data),
        _memory(data),
        _compile_section(data),
        _diagnostics(data),
    ]
    blob = html.escape(json.dumps(data, default=str))
    status = data["verdict"]["status"]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>pgle report: {_e(status)}</title><style>" + CSS + "</style></head><body>"
        f"<h1>PGLE verdict: {_e(status)}</h1>"
        + "".join(sections[:2])
        + "<h2>Runs</h2>"
        + head
        + "".join(sections[2:])
        + f'<details><summary>JSON</summary><pre id="report-json">{blob}</pre></details>'
        "</body></html>\n"
    )
