"""ModelCache: an LRU bounded in bytes, safe to share between threads, and under its cap in an app
that keeps training and loading models."""

from __future__ import annotations

import random
import threading

import pytest

from service.repository.cache import ModelCache
from tests.service.conftest import train_body


def test_get_put_and_accounting() -> None:
    cache = ModelCache(max_bytes=100)
    assert cache.get("a") is None
    assert cache.put("a", "A", 40)
    assert cache.get("a") == "A" and "a" in cache
    assert (cache.count, cache.bytes_used) == (1, 40)
    assert cache.put("a", "A2", 10)  # replacing an entry replaces its bytes
    assert (cache.get("a"), cache.count, cache.bytes_used) == ("A2", 1, 10)


def test_evicts_least_recently_used_by_bytes() -> None:
    cache = ModelCache(max_bytes=100)
    cache.put("a", "A", 40)
    cache.put("b", "B", 40)
    cache.get("a")  # b is now the oldest
    cache.put("c", "C", 30)
    assert "b" not in cache and "a" in cache and "c" in cache
    assert cache.bytes_used == 70
    cache.put("d", "D", 100)  # fills it alone: everything else goes
    assert (cache.count, cache.bytes_used, cache.get("d")) == (1, 100, "D")


def test_oversize_entry_is_not_kept() -> None:
    cache = ModelCache(max_bytes=100)
    cache.put("a", "A", 50)
    assert not cache.put("big", "BIG", 101)
    assert "big" not in cache and cache.get("a") == "A" and cache.bytes_used == 50
    cache.put("a", "A", 50)
    assert not cache.put("a", "A-too-big", 101)  # an oversize replacement drops the old one
    assert "a" not in cache and cache.bytes_used == 0


def test_discard_and_clear() -> None:
    cache = ModelCache(max_bytes=100)
    cache.put("a", "A", 10)
    cache.put("b", "B", 20)
    cache.discard("a")
    cache.discard("missing")
    assert (cache.count, cache.bytes_used) == (1, 20)
    cache.clear()
    assert (cache.count, cache.bytes_used, cache.get("b")) == (0, 0, None)


def test_zero_bytes_cache_keeps_nothing_but_empty_entries() -> None:
    cache = ModelCache(max_bytes=0)
    assert not cache.put("a", "A", 1)
    assert cache.put("z", "Z", 0)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        ModelCache(max_bytes=-1)
    with pytest.raises(ValueError):
        ModelCache(max_bytes=10).put("a", "A", -1)


def test_threads_keep_the_bound_and_the_accounting() -> None:
    cache = ModelCache(max_bytes=1000)
    sizes = {f"m{i}": 37 * (i % 9 + 1) for i in range(64)}
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        try:
            for _ in range(3000):
                key = rng.choice(list(sizes))
                action = rng.random()
                if action < 0.5:
                    cache.put(key, (key, sizes[key]), sizes[key])
                elif action < 0.9:
                    value = cache.get(key)
                    assert value is None or value == (key, sizes[key])
                else:
                    cache.discard(key)
                assert cache.bytes_used <= cache.max_bytes
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    held = [key for key in sizes if key in cache]
    assert cache.count == len(held)
    assert cache.bytes_used == sum(sizes[key] for key in held) <= cache.max_bytes


def test_the_cache_stays_under_its_cap_while_models_keep_being_trained_and_loaded(
    make_client, iris
) -> None:
    """A small ``BSVM_MODEL_CACHE_MB`` in a whole app: every new model and every reload of an
    evicted one keeps the cache's bytes (and the metric) within the cap."""
    X, y = iris
    cap = int(0.05 * 2**20)  # about four kernel SVMs of iris (~12 kB each)
    client = make_client(model_cache_mb=0.05)
    store = client.app.state.store
    trained: list[str] = []
    rows = {"X": X[::15].tolist()}
    for i in range(12):
        body = train_body(X, y, "kernel_svm", name="cap", params={"C": 0.5 + i})
        answer = client.post("/train", json=body)
        assert answer.status_code == 201, answer.text
        trained.append(answer.json()["model_id"])
        for model_id in (trained[-1], trained[i // 2], trained[0]):  # new, older, oldest
            assert client.post("/predict", json={"model": model_id, **rows}).status_code == 200
            assert store.cached_bytes <= cap
        gauge = next(
            line
            for line in client.get("/metrics").text.splitlines()
            if line.startswith("bsvm_models_cached_bytes ")
        )
        assert float(gauge.split()[1]) <= cap
    assert 0 < store.cached_count < len(trained)  # it evicted, and reloaded what was asked


def test_a_companion_lives_and_dies_with_its_entry():
    cache = ModelCache(max_bytes=10)
    first, second = object(), object()
    cache.put("a", first, 6)
    cache.keep_companion("a", first, "ready a")
    assert cache.companion("a", first) == "ready a"
    assert cache.companion("a", second) is None  # never for another estimator
    cache.keep_companion("b", second, "ready b")  # no entry of b: nothing kept
    assert cache.companion("b", second) is None
    cache.put("b", second, 6)  # evicts a, and its companion with it
    assert cache.companion("a", first) is None
    cache.put("a", first, 3)  # back in the cache: made again, not found
    assert cache.companion("a", first) is None


def test_cached_companion_is_get_then_companion():
    cache = ModelCache(max_bytes=10)
    first, second = object(), object()
    assert cache.cached_companion("a") is None  # no entry
    cache.put("a", first, 4)
    assert cache.cached_companion("a") is None  # an entry without a companion
    cache.keep_companion("a", first, "ready a")
    cache.put("b", second, 4)
    assert cache.cached_companion("a") == "ready a"  # and a is now the most recently used
    cache.put("c", object(), 4)  # evicts the least recently used: b, not a
    assert cache.get("b") is None
    assert cache.cached_companion("a") == "ready a"
    cache.put("a", second, 4)  # another estimator under the id: the old companion is gone
    assert cache.cached_companion("a") is None
