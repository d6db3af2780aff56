"""Shared fixtures: the public captures decoded once per test session."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

import kdissect

REPO = Path(__file__).resolve().parents[2]
PUBLIC = REPO.parent / "shared" / "public-captures"
SAMPLES = REPO / "samples"


def public(name: str) -> Path:
    path = PUBLIC / name
    if not path.exists():
        pytest.skip(f"public capture {name} not present")
    return path


def read_table(outdir: Path, table: str):
    return ds.dataset(outdir / table, format="parquet").to_table()


@pytest.fixture(scope="session")
def public_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not PUBLIC.exists():
        pytest.skip("shared/public-captures not present")
    out = tmp_path_factory.mktemp("public") / "out"
    kdissect.write_dataset([PUBLIC], out, records=True)
    return out


@pytest.fixture(scope="session")
def exchanges(public_dataset: Path):
    return read_table(public_dataset, "exchanges").to_pandas()


@pytest.fixture(scope="session")
def partitions(public_dataset: Path):
    return read_table(public_dataset, "partitions").to_pandas()


@pytest.fixture(scope="session")
def anomalies(public_dataset: Path):
    return read_table(public_dataset, "anomalies").to_pandas()
