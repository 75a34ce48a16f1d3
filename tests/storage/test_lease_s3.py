"""The commit lease on a real S3-compatible server: the conditional put (If-None-Match)."""

from __future__ import annotations

from snap_spark.lake.lease import LEASE_FOLDER, _create_exclusive, _name, commit_lease
from tests.s3server import S3Server
from tests.storage.conftest import BUCKET


def test_create_if_absent_on_s3(s3: S3Server) -> None:
    location = f"s3://{BUCKET}/lease-test/{LEASE_FOLDER}/{_name(0)}"
    assert _create_exclusive(location, b"{}") is True
    assert _create_exclusive(location, b"{}") is False
    lake = f"s3://{BUCKET}/lease-lake"
    with commit_lease(lake, "messages", wait=5) as held:
        assert held.number == 0
    with commit_lease(lake, "messages", wait=5) as held:
        assert held.number == 1
    assert sorted(s3.keys(BUCKET, f"lease-lake/{LEASE_FOLDER}/")) == [
        f"lease-lake/{LEASE_FOLDER}/{_name(0)}", f"lease-lake/{LEASE_FOLDER}/{_name(1)}"]
