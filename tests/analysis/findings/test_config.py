"""Thresholds: defaults, TOML files and --set overrides, and their errors."""

from __future__ import annotations

import pytest

from analysis.findings import RULES, FindingsConfigError, load

ISSUE_IDS = {
    "producer.tiny_batches", "producer.uncompressed", "producer.large_batches", "producer.acks",
    "producer.not_idempotent", "producer.duplicates", "client.error_storm", "client.metadata_storm",
    "client.connection_churn", "client.auth_failures", "client.no_client_id", "consumer.commit_per_message",
    "consumer.busy_polling", "consumer.lag_growing", "group.rebalance_storm", "group.long_rebalance",
    "group.session_timeout", "group.member_vanished", "group.poll_timeout", "broker.slow", "broker.throttling", "broker.unanswered",
    "topic.hot_partition", "client.legacy_format", "client.old_versions",
    "topic.mixed_formats", "topic.unknown_schema", "topic.schema_changes",        # issue 31: record payloads
    "share.poison_records", "share.lock_expired", "share.session_churn", "share.unbalanced",  # issue 47
}


def test_every_rule_of_the_issue_exists_once():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert set(ids) == ISSUE_IDS


def test_set_overrides_and_disables():
    cfg = load(RULES, sets=["producer.tiny_batches.min_requests_per_s=20", "client.no_client_id.enabled=false"])
    assert cfg.for_rule("producer.tiny_batches")["min_requests_per_s"] == 20
    assert cfg.for_rule("producer.tiny_batches")["min_requests"] == 20  # the others keep their defaults
    assert cfg.disabled == {"client.no_client_id"}


def test_toml_both_spellings_then_set_wins(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text('["producer.tiny_batches"]\nmin_requests = 5\n\n[client.metadata_storm]\nmax_requests_per_s = 7\n'
                    '\n[broker.slow]\nenabled = false\n')
    cfg = load(RULES, path, ["client.metadata_storm.max_requests_per_s=9"])
    assert cfg.for_rule("producer.tiny_batches")["min_requests"] == 5
    assert cfg.for_rule("client.metadata_storm")["max_requests_per_s"] == 9
    assert cfg.disabled == {"broker.slow"}


@pytest.mark.parametrize(("item", "message"), [
    ("producer.tiny_batch.min_requests=1", "unknown rule 'producer.tiny_batch'"),
    ("producer.tiny_batches.min_request=1", "unknown threshold 'min_request'"),
    ("producer.tiny_batches.min_requests=many", "expected a number"),
    ("producer.tiny_batches", "expected RULE.THRESHOLD=VALUE"),
    ("producer.acks.enabled=maybe", "expected true or false"),
])
def test_bad_set_says_what_is_wrong(item, message):
    with pytest.raises(FindingsConfigError, match=message.replace(".", r"\.")):
        load(RULES, sets=[item])


def test_bad_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[x\n")
    with pytest.raises(FindingsConfigError, match="not valid TOML"):
        load(RULES, path)
    with pytest.raises(FindingsConfigError, match="missing.toml"):
        load(RULES, tmp_path / "missing.toml")


def test_readme_lists_every_rule_with_its_defaults():
    from pathlib import Path

    from analysis.findings import rules_markdown
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert rules_markdown() in readme
