"""deploy/grafana/mediator.json is a dashboard Grafana can load, and every series its queries
(and the rules' expressions) read exists: exported by a running node or worker, made by
Prometheus itself, or recorded by deploy/prometheus/rules.yaml. A metric renamed in the code
and not in the dashboard fails here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.monitoring.prometheus import DASHBOARD, exported_names, load_rules


def _words(text: str) -> set[str]:
    return set(text.split())


# What PromQL names that is not a series.
FUNCTIONS = _words(
    """
    abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes
    clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year
    days_in_month deg delta deriv exp floor histogram_count histogram_fraction
    histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour idelta
    increase irate label_join label_replace last_over_time ln log10 log2 mad_over_time
    max_over_time min_over_time minute month pi predict_linear present_over_time
    quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_desc sqrt
    stddev_over_time stdvar_over_time sum_over_time tan tanh time timestamp vector year
    """
)
AGGREGATIONS = _words(
    """
    sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk
    limit_ratio
    """
)
# Keywords followed by a parenthesised list of label names, not an expression.
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end"}
# Series Prometheus makes for every target.
SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[A-Za-z]*")
_CLOSING = {"{": "}", "[": "]", "(": ")"}


def _skip_group(expr: str, i: int) -> int:
    """The index after the group (braces, brackets or parentheses) opened at `i`, strings
    inside it skipped whole."""
    depth, opener = 0, expr[i]
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
            continue
        if c == opener:
            depth += 1
        elif c == _CLOSING[opener]:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {opener} in {expr!r}")


def _skip_string(expr: str, i: int) -> int:
    quote, i = expr[i], i + 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" and quote != "`" else 1
    return i + 1


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads (Grafana's $variables allowed)."""
    names: set[str] = set()
    i = 0
    while i < len(expr):
        c = expr[i]
        if c.isspace():
            i += 1
        elif c == "#":  # a comment, to the end of the line
            i = expr.find("\n", i) if "\n" in expr[i:] else len(expr)
        elif c in "\"'`":
            i = _skip_string(expr, i)
        elif c in "{[":  # label matchers; a range, a subquery's range
            i = _skip_group(expr, i)
        elif c == "$":  # a Grafana variable: $name, ${name}, ${name:format}
            i += 1
            if i < len(expr) and expr[i] == "{":
                i = _skip_group(expr, i)
            elif m := _IDENT.match(expr, i):
                i = m.end()
        elif (m := _NUMBER.match(expr, i)) and not _IDENT.match(expr, i):
            i = m.end()
        elif m := _IDENT.match(expr, i):
            word, i = m.group(), m.end()
            rest = expr[i:].lstrip()
            if word in LABEL_LISTS:
                if rest.startswith("("):
                    i = _skip_group(expr, len(expr) - len(rest))
            elif word in AGGREGATIONS or word in FUNCTIONS or word in KEYWORDS:
                if word == "offset":  # its duration follows
                    i = len(expr) - len(rest)
                    if number := _NUMBER.match(expr, i):
                        i = number.end()
            elif rest.startswith("("):
                raise ValueError(f"unknown function {word!r} in {expr!r}")
            else:
                names.add(word)
        else:  # operators, parentheses, commas, @
            i += 1
    return names


def _grafana_query_names(query: str) -> set[str]:
    """The series a template variable's query reads: label_values(series, label),
    label_values(label) or query_result(expr)."""
    if m := re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.DOTALL):
        return metric_names(m.group(1))
    if re.fullmatch(r"\s*label_values\(\s*\w+\s*\)\s*", query):
        return set()
    if m := re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.DOTALL):
        return metric_names(m.group(1))
    return metric_names(query)


def _all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _all_panels(panel.get("panels", []))


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def dashboard_reads() -> list[tuple[str, set[str]]]:
    """(where, series names) for every panel target and every query variable."""
    data = _dashboard()
    reads = [
        (f"panel {panel['title']!r}", metric_names(target["expr"]))
        for panel in _all_panels(data["panels"])
        for target in panel.get("targets", [])
    ]
    for variable in data["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            reads.append((f"variable {variable['name']}", _grafana_query_names(text)))
    return reads


RECORDS = {rule["record"] for rule in load_rules() if "record" in rule}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'sum without (instance, pod) (rate(a_total{x="}[", y=~"$job"}[5m] offset 1h))',
            {"a_total"},
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(b_bucket[$__rate_interval])))",
            {"b_bucket"},
        ),
        ("a / on (job) group_left (node) b > bool 1e3", {"a", "b"}),
        ("up == 0 and on (job) mediator_ready # the rest\n or c", {"up", "mediator_ready", "c"}),
        ("31 * 86400 + time() - ${var:raw}", set()),
        ("sum(rate(x[5m])) by (job) / ignoring(le) 0x1F", {"x"}),
        ("job:c:rate5m{job=~'$job'} > 0.5 unless d offset 5m", {"job:c:rate5m", "d"}),
    ],
)
def test_the_name_reader_reads_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_name_reader_refuses_what_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="unknown function 'rat'"):
        metric_names("rat(x[5m])")


def test_the_dashboard_is_one_grafana_can_load() -> None:
    data = _dashboard()
    assert data["schemaVersion"] >= 36
    panels = list(_all_panels(data["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    for name in ("job", "instance", "queue_namespace"):
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    titles = {panel["title"] for panel in panels if panel["type"] == "row"}
    assert titles >= {"Overview", "HTTP", "Queues", "Workers", "Redis memory"}


def test_the_dashboard_reads_the_recording_rules() -> None:
    """Where a record exists the dashboard reads it (the rules do the work once); every record
    shows somewhere except the bucket rates behind the quantiles."""
    read = set().union(*(names for _, names in dashboard_reads()))
    unused = RECORDS - read - {"job_route_le:mediator_http_request_duration_seconds_bucket:rate5m"}
    assert unused == set()


@pytest.mark.full
def test_every_series_the_dashboard_and_rules_read_is_exported(
    node_exposition: str, worker_exposition: str
) -> None:
    exported = exported_names(node_exposition) | exported_names(worker_exposition)
    # The scrapes prove the reader sees what is there: the families of both processes.
    assert {"mediator_ready", "mediator_http_request_duration_seconds_bucket"} <= exported
    assert "mediator_worker_leases" in exported_names(worker_exposition)
    known = exported | RECORDS | SCRAPE_SERIES
    reads = dashboard_reads() + [
        (f"rule {rule.get('record') or rule['alert']}", metric_names(rule["expr"]))
        for rule in load_rules()
    ]
    unknown = {(where, name) for where, names in reads for name in names if name not in known}
    assert reads and all(names for _, names in reads)
    assert unknown == set()
