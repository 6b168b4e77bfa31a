"""The files in which a shared queue saves the requests it could not give to its
Redis before its process stopped (``extensions/crawldelay/_saved.py``)."""

import pickle
import re

import pytest

from scrapy_rfc9309.extensions.crawldelay._saved import save, take


def test_saved_requests_are_taken_once_and_deleted_once_read(tmp_path):
    save(tmp_path, "queue-a", "p1", [b"one", b"two"])
    save(tmp_path, "queue-a", "p2", ["three"])
    save(tmp_path, "queue-b", "p1", [b"other"])
    taken = [records for _, records in take(tmp_path, "queue-a", "p3")]
    assert taken == [[b"one", b"two"], ["three"]]  # in the order of their names
    assert [path.name for path in tmp_path.iterdir()] == ["queue-b.p1.requests"]
    assert list(take(tmp_path, "queue-a", "p4")) == []


def test_a_file_another_process_took_first_is_skipped(tmp_path):
    save(tmp_path, "queue", "p1", [b"one"])
    save(tmp_path, "queue", "p2", [b"two"])
    mine = take(tmp_path, "queue", "p3")
    _, first = next(mine)
    # The other process takes what is left meanwhile.
    assert [records for _, records in take(tmp_path, "queue", "p4")] == [[b"two"]]
    assert list(mine) == []
    assert first == [b"one"]


def test_an_unreadable_file_is_named_and_kept(tmp_path):
    (tmp_path / "queue.p1.requests").write_bytes(b"not a pickle")
    with pytest.raises(pickle.UnpicklingError, match=re.escape("queue.p1.requests.taken-by-p2")):
        list(take(tmp_path, "queue", "p2"))
    assert [path.name for path in tmp_path.iterdir()] == ["queue.p1.requests.taken-by-p2"]
