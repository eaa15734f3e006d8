"""A writer through Spark Connect that stalls while it holds the writer lock (test_connect_writer.py):
it takes the lock with a short lease, reads the next transaction id, stops itself (SIGSTOP) and,
once continued, goes on to record a transaction under that id. It prints what each step said.

    python stalled_writer.py <connect url> <lock table> <transactions table> <lease seconds>
"""

from __future__ import annotations

import os
import signal
import sys

from pyspark.sql import SparkSession

from harness import transaction_rows
from lakehistory.history import ledger
from lakehistory.history import lock as lock_module


def main(url: str, lock: str, transactions: str, lease: int) -> None:
    lock_module.LEASE_SECONDS, lock_module.RENEW_SECONDS = lease, max(1, lease // 4)
    spark = SparkSession.builder.remote(url).create()
    with lock_module.holding(spark, lock, wait_seconds=0):
        next_id = spark.sql(f"select coalesce(max(txn_id), 0) + 1 as n from {transactions}").collect()[0].n
        print(f"holding the lock, next id {next_id}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        try:
            lock_module.check_held()
            print("check_held: still held", flush=True)
        except lock_module.WriterLostError as lost:
            print(f"check_held: {lost}", flush=True)
        try:
            ledger.insert_transactions(
                spark, transactions, spark.sql(transaction_rows(next_id, history="stalled")), next_id
            )
            print("recorded", flush=True)
        except ledger.TransactionTakenError as taken:
            print(f"recording: {taken}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4], int(sys.argv[4]))
