"""Rule thresholds: the defaults each rule declares, overridden by a TOML file and ``--set``.

``--set producer.tiny_batches.min_requests_per_s=20`` (the rule id, a dot, the
threshold name) or ``--set producer.acks.enabled=false``. A TOML file holds one
table per rule, either spelling:

    ["producer.tiny_batches"]
    min_requests_per_s = 20

    [client.metadata_storm]     # nested tables work as well
    max_requests_per_s = 5
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analysis.findings.core import Rule


class FindingsConfigError(ValueError):
    """A bad --set or TOML entry: unknown rule, unknown threshold, not a number."""


@dataclass
class Config:
    thresholds: dict[str, dict[str, float]]
    disabled: set[str] = field(default_factory=set)

    def for_rule(self, rule_id: str) -> dict[str, float]:
        return self.thresholds[rule_id]


def defaults(rules: Sequence[Rule]) -> Config:
    return Config({r.id: dict(r.thresholds) for r in rules})


def _value(rule_id: str, name: str, raw: object) -> float | bool:
    if name == "enabled":
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            return str(raw).lower() in ("true", "1", "yes", "on")
        raise FindingsConfigError(f"{rule_id}.enabled: expected true or false, got {raw!r}")
    if isinstance(raw, bool):
        raise FindingsConfigError(f"{rule_id}.{name}: expected a number, got {raw!r}")
    try:
        return float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FindingsConfigError(f"{rule_id}.{name}: expected a number, got {raw!r}") from None


def _apply(cfg: Config, rule_id: str, name: str, raw: object) -> None:
    if rule_id not in cfg.thresholds:
        raise FindingsConfigError(f"unknown rule {rule_id!r} (known: {', '.join(sorted(cfg.thresholds))})")
    known = cfg.thresholds[rule_id]
    if name != "enabled" and name not in known:
        names = ", ".join(sorted(known)) or "none"
        raise FindingsConfigError(f"{rule_id}: unknown threshold {name!r} (its thresholds: {names}; or enabled)")
    value = _value(rule_id, name, raw)
    if name == "enabled":
        (cfg.disabled.discard if value else cfg.disabled.add)(rule_id)
    else:
        known[name] = float(value)


def _flatten(table: Mapping[str, object], prefix: str = "") -> Iterable[tuple[str, object]]:
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping):
            yield from _flatten(value, path)
        else:
            yield path, value


def load(rules: Sequence[Rule], toml_path: str | Path | None = None, sets: Sequence[str] = ()) -> Config:
    """Defaults, then the TOML file, then each ``rule.threshold=value`` in order."""
    cfg = defaults(rules)
    if toml_path is not None:
        try:
            data = tomllib.loads(Path(toml_path).read_text())
        except OSError as e:
            raise FindingsConfigError(f"{toml_path}: {e.strerror or e}") from None
        except tomllib.TOMLDecodeError as e:
            raise FindingsConfigError(f"{toml_path}: not valid TOML: {e}") from None
        for path, value in _flatten(data):
            rule_id, _, name = path.rpartition(".")
            _apply(cfg, rule_id, name, value)
    for item in sets:
        key, sep, raw = item.partition("=")
        rule_id, _, name = key.strip().rpartition(".")
        if not sep or not rule_id:
            raise FindingsConfigError(f"--set {item!r}: expected RULE.THRESHOLD=VALUE, "
                                      "e.g. producer.tiny_batches.min_requests_per_s=20")
        _apply(cfg, rule_id, name.strip(), raw.strip())
    return cfg
