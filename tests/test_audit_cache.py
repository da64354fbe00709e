"""core.audit_cache: finished audits by key, bounded, oldest out first, safe across threads."""

import threading

import pytest

from core.analysis.audit_cache import MAX_CACHED_AUDITS, AuditCache

# One cache for the whole module, as the page holds one per process; cleared before each test.
CACHE = AuditCache(max_entries=3)


@pytest.fixture(autouse=True)
def empty_cache():
    CACHE.clear()
    return CACHE


def test_a_result_is_kept_under_its_key():
    result = object()
    assert CACHE.get("a") is None and "a" not in CACHE
    assert CACHE.add("a", result) is True
    assert CACHE.get("a") is result and "a" in CACHE and len(CACHE) == 1


def test_the_same_key_again_keeps_the_first_result():
    first, second = object(), object()
    CACHE.add("a", first)
    assert CACHE.add("a", second) is False
    assert CACHE.get("a") is first and len(CACHE) == 1


def test_the_oldest_result_is_evicted_first():
    for key in "abcd":
        CACHE.add(key, key)
    assert len(CACHE) == 3 and "a" not in CACHE
    assert [CACHE.get(k) for k in "bcd"] == ["b", "c", "d"]


def test_clear_forgets_everything():
    CACHE.add("a", 1)
    CACHE.clear()
    assert len(CACHE) == 0 and CACHE.get("a") is None
    assert CACHE.add("a", 2) is True  # recorded again after a clear


def test_only_one_of_many_threads_adds_a_key():
    added: list[bool] = []
    start = threading.Barrier(8)

    def finish() -> None:
        start.wait()
        added.append(CACHE.add("same", object()))

    threads = [threading.Thread(target=finish) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(added) == [False] * 7 + [True]


def test_default_size_and_refused_sizes():
    assert AuditCache().max_entries == MAX_CACHED_AUDITS
    with pytest.raises(ValueError, match="at least 1"):
        AuditCache(max_entries=0)
