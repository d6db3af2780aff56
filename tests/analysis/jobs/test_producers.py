from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import producers
from tests.analysis.conftest import exchange, table

pytestmark = pytest.mark.slow


def batch(index, batches, records, pid, epoch, transactional):
    return {"index": index, "records": {"batch_count": batches, "record_count": records, "producer_id": pid,
                                        "producer_epoch": epoch, "transactional": transactional}}


def test_producers_batches_and_transactions(spark):
    def tx(cid, api, key, t, **body):
        return exchange(cid, api, api_key=key, t=t, client="p", request=body, response={"error_code": 0})

    ex = table(spark, "exchanges", [
        exchange(1, "Produce", api_key=0, t=0.1, client="p", request={
            "transactional_id": "tx", "topic_data": [{"name": "t", "partition_data": [
                batch(0, 1, 3, 7, 2, True), batch(1, 2, 4, 7, 2, True)]}]}),
        exchange(2, "Produce", api_key=0, t=0.2, client="q", request={
            "transactional_id": None, "topic_data": [{"name": "t", "partition_data": [
                batch(0, 1, 5, -1, -1, False)]}]}),
        tx(3, "AddPartitionsToTxn", 24, 0.0, v3_and_below_transactional_id="tx"),
        tx(4, "AddOffsetsToTxn", 25, 0.5, transactional_id="tx"),
        tx(5, "EndTxn", 26, 1.0, transactional_id="tx", committed=True),
        tx(6, "AddPartitionsToTxn", 24, 2.0, v3_and_below_transactional_id="tx"),
        tx(7, "EndTxn", 26, 3.0, transactional_id="tx", committed=False),
        tx(8, "AddPartitionsToTxn", 24, 4.0, v3_and_below_transactional_id="tx"),   # still open at the end
    ])
    assertDataFrameEqual(producers.producers(ex), spark.createDataFrame([
        ("p", 7, 2, "tx", True, True, 3, 1, 1, 1, 3, 7, 7 / 3, 3.0),
        ("q", -1, -1, None, False, False, 0, 0, 0, 1, 1, 5, 5.0, 1.0),
    ], "client_id string, producer_id long, producer_epoch int, transactional_id string, idempotent boolean, "
       "transactional boolean, transactions_begun long, transactions_committed long, transactions_aborted long, "
       "requests long, batches long, records long, records_per_batch double, batches_per_request double"))
