"""(slow) Where a table and a finding speak of the same thing, they say the same, on every bundled sample: a
rebalance the ``rebalances`` table lists is the one a group finding names (its generation, span, members),
and the lag a ``consumer.lag_growing`` finding quotes is the ``consumer_lag`` table's; the share group findings
quote the share tables' counts (``share_deliveries``, ``share_in_flight``, ``share_session_errors``).

The rules run with thresholds low enough that every generation is a long rebalance and every group a
storm, so each row of ``rebalances`` is checked against a finding, not only the few the defaults report.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from analysis import arguments, output, schedule
from tests.analysis.engines import connect_mode
from tests.analysis.samples import NAMES

pytestmark = pytest.mark.slow

EVERYTHING = ["group.long_rebalance.min_duration_ms=0", "group.rebalance_storm.min_rebalances=1",
              "group.rebalance_storm.max_per_hour=0", "consumer.lag_growing.min_samples=2",
              "consumer.lag_growing.min_growth_records=0", "share.poison_records.min_delivery_count=2",
              "share.session_churn.min_errors=1", "share.unbalanced.min_ratio=0", "share.unbalanced.min_records=0"]


@pytest.fixture(scope="module")
def results(embedded, sample_datasets) -> dict[str, dict[str, list[dict]]]:
    """Per sample, its group, lag, share and ``findings`` tables (as ``analyze --json``)."""
    rules = arguments.findings_config(None, EVERYTHING)
    out = {}
    with connect_mode(True):
        for name in NAMES:
            request = schedule.Request([str(sample_datasets[name])], findings=rules)
            out[name] = output.as_json(schedule.analyze(embedded, request, ["groups", "lag", "shares", "findings"]))
    return out


def _found(tables: dict, rule: str) -> list[tuple[dict, dict]]:
    """Each finding of ``rule`` with its evidence (a null figure is left out of the evidence's JSON)."""
    return [(f, json.loads(f["evidence"])) for f in tables["findings"] if f["finding"] == rule]


def _same_ms(quoted: float | None, exact: float | None) -> bool:
    """A duration a finding quotes to 0.1 ms (Spark rounds half up, Python's round() to even) is the table's."""
    return quoted == exact if quoted is None or exact is None else abs(quoted - exact) <= 0.05 + 1e-9


@pytest.mark.parametrize("name", NAMES)
def test_each_rebalance_is_the_one_its_findings_name(results, name):
    tables = results[name]
    rebalances = {(r["group_id"], r["generation_id"]): r for r in tables["rebalances"]}
    long = {(f["subject"], ev.get("generation_id")): (f, ev) for f, ev in _found(tables, "group.long_rebalance")}
    # Every generation took 0 ms or more: each is a long rebalance at threshold 0, and no finding names another.
    assert set(long) == set(rebalances)
    for key, (f, ev) in long.items():
        row = rebalances[key]
        assert _same_ms(ev.get("duration_ms"), row["duration_ms"]), key
        assert (ev.get("members"), ev.get("clients"), f["first_ts"], f["last_ts"]) \
            == (row["members"], row["member_client_ids"], row["start_ts"], row["end_ts"]), key
    per_group = defaultdict(list)
    for group, generation in rebalances:
        per_group[group].append(generation)
    storms = {f["subject"]: ev for f, ev in _found(tables, "group.rebalance_storm")}
    assert storms.keys() == per_group.keys()
    for group, ev in storms.items():
        assert (ev.get("rebalances"), ev.get("generations")) == (len(per_group[group]), sorted(per_group[group])), group
    for f, ev in _found(tables, "group.member_vanished"):
        row = rebalances[(f["subject"], ev.get("next_generation"))]
        assert _same_ms(ev.get("rebalance_ms"), row["duration_ms"]) and ev.get("members_after") == row["member_client_ids"]
        assert ev.get("client_id") not in row["member_client_ids"]


@pytest.mark.parametrize("name", NAMES)
def test_the_lag_a_finding_quotes_is_the_tables(results, name):
    tables = results[name]
    lag = {(r["group_id"], r["client_id"] if r["group_id"] is None else None, r["topic"], r["partition"]): r
           for r in tables["consumer_lag"]}
    for f, ev in _found(tables, "consumer.lag_growing"):
        topic, _, partition = f["subject"].rpartition("-")
        key = (ev.get("group_id"), ev.get("client_id") if ev.get("group_id") is None else None, topic, int(partition))
        assert key in lag, key
        assert (ev.get("lag"), ev.get("lag_from")) == (lag[key]["lag"], lag[key]["lag_from"]), key


def test_the_samples_give_the_group_findings_something_to_agree_on(results):
    # No bundled sample has a consumer falling behind (consumer.lag_growing's agreement with consumer_lag is
    # held on hand-made rows in tests/analysis/findings/test_consumers.py).
    kinds = Counter(f["finding"] for tables in results.values() for f in tables["findings"])
    rebalances = sum(len(tables["rebalances"]) for tables in results.values())
    assert rebalances >= 10 and kinds["group.long_rebalance"] == rebalances
    assert kinds["group.member_vanished"] >= 1 and kinds["group.rebalance_storm"] >= 3


def _tp(row: dict) -> str:
    return f"{row['group_id']} {row['topic']}-{row['partition']}"


@pytest.mark.parametrize("name", NAMES)
def test_the_share_findings_quote_the_share_tables(results, name):
    tables = results[name]
    deliveries = tables["share_deliveries"]
    # Poison records (every redelivery counts at threshold 2): a finding per partition with a rejected or
    # redelivered record, quoting the table's rejected records and highest delivery count.
    want = defaultdict(lambda: {"rejected": 0, "max": 1, "redelivered": 0})
    for r in deliveries:
        w = want[_tp(r)]
        w["rejected"] += r["rejected"]
        w["redelivered"] += r["redelivered"]
        w["max"] = max(w["max"], r["max_delivery_count"] or 1)
    want = {k: w for k, w in want.items() if w["rejected"] or w["redelivered"]}
    poison = {f["subject"]: ev for f, ev in _found(tables, "share.poison_records")}
    assert poison.keys() == want.keys()
    for key, ev in poison.items():
        assert ev["rejected_records"] == want[key]["rejected"], key
        if want[key]["redelivered"]:
            assert ev["max_delivery_count"] == want[key]["max"], key
    expired = Counter()
    for r in tables["share_in_flight"]:
        if r["state"] == "lock_expired":
            expired[(r["client_id"], r["group_id"], f"{r['topic']}-{r['partition']}")] += r["records"]
    assert Counter({(f["subject"], ev["group_id"], ev["topic_partition"]): ev["records"]
                    for f, ev in _found(tables, "share.lock_expired")}) == expired
    churn = Counter()
    for r in tables["share_session_errors"]:
        if r["error"] in ("SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH", "SHARE_SESSION_LIMIT_REACHED"):
            churn[(r["client_id"], r["group_id"])] += r["count"]
    assert Counter({(f["subject"], ev["group_id"]): ev["errors"] for f, ev in _found(tables, "share.session_churn")}) \
        == churn
    acquired = Counter()
    for r in deliveries:
        acquired[(r["client_id"], r["group_id"])] += r["acquired"]
    members = Counter(g for _, g in acquired)
    assert {(f["subject"], ev["group_id"]): ev["acquired"] for f, ev in _found(tables, "share.unbalanced")} \
        == {k: v for k, v in acquired.items() if members[k[1]] >= 2}


def test_the_share_sample_gives_the_share_findings_something_to_agree_on(results):
    kinds = Counter(f["finding"] for f in results["mock-share-groups"]["findings"])
    assert kinds["share.poison_records"] >= 3 and kinds["share.lock_expired"] == 1
    assert kinds["share.session_churn"] == 3 and kinds["share.unbalanced"] == 3
