"""The middleware's body reader and response header, against what they replace.

``StallWatch`` does ``asyncio.timeout``'s job for every chunk wait with one timer, and
``set_header`` does ``MutableHeaders(scope=message)[key] = value``; both are checked here against
those behaviours.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import MutableHeaders

from service.api.body_read import StallWatch, read_capped_body
from service.api.middleware import set_header
from service.errors import PayloadTooLarge, RequestTimeout


def chunks(*parts: bytes, delay: float = 0.0):
    """A ``receive`` handing out ``parts`` as one body, each after ``delay`` seconds."""
    todo = list(parts)

    async def receive() -> dict:
        if delay:
            await asyncio.sleep(delay)
        body = todo.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(todo)}

    return receive


async def never() -> dict:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


def test_chunks_are_joined_and_capped():
    body = asyncio.run(read_capped_body(chunks(b"ab", b"", b"cd"), 4, StallWatch(1.0)))
    assert body == b"abcd"
    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_capped_body(chunks(b"ab", b"cde"), 4, StallWatch(1.0)))


def test_slow_chunks_within_the_timeout_each_are_read():
    # three waits of 0.05 s each: 0.15 s in all, longer than the 0.1 s allowed for one wait
    body = asyncio.run(read_capped_body(chunks(b"a", b"b", b"c", delay=0.05), 10, StallWatch(0.1)))
    assert body == b"abc"


def test_a_stalled_body_is_a_request_timeout_and_the_task_is_not_left_cancelled():
    async def main() -> int:
        with pytest.raises(RequestTimeout):
            await read_capped_body(never, 10, StallWatch(0.05))
        await asyncio.sleep(0)  # a left-over cancellation would raise here
        return asyncio.current_task().cancelling()

    assert asyncio.run(main()) == 0


def test_a_cancellation_from_elsewhere_stays_a_cancellation():
    async def main() -> None:
        task = asyncio.create_task(read_capped_body(never, 10, StallWatch(5.0)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_the_cut_falls_between_the_timeout_and_a_quarter_more():
    async def main() -> float:
        started = asyncio.get_running_loop().time()
        with pytest.raises(RequestTimeout):
            await read_capped_body(never, 10, StallWatch(0.2))
        return asyncio.get_running_loop().time() - started

    # never before the timeout; late only by the sweep's period (plus a loaded machine's delay)
    assert 0.2 <= asyncio.run(main()) < 0.2 * 1.25 + 0.25


def test_only_the_stalled_one_of_many_bodies_is_cut():
    async def main() -> list[object]:
        watch = StallWatch(0.3)
        steady = read_capped_body(chunks(b"a", b"b", b"c", delay=0.03), 10, watch)
        stalled = read_capped_body(never, 10, watch)
        return await asyncio.gather(steady, stalled, return_exceptions=True)

    steady, stalled = asyncio.run(main())
    assert steady == b"abc"
    assert isinstance(stalled, RequestTimeout)


def test_the_watch_has_no_timer_left_once_every_body_is_read():
    async def main() -> object:
        watch = StallWatch(0.05)
        await read_capped_body(chunks(b"ab"), 10, watch)
        await asyncio.sleep(0.1)  # one sweep finds no open wait and does not re-arm
        return watch.sweep_handle

    assert asyncio.run(main()) is None


def test_a_disconnect_ends_the_body():
    async def receive() -> dict:
        return {"type": "http.disconnect"}

    assert asyncio.run(read_capped_body(receive, 10, StallWatch(1.0))) == b""


NAMES = st.sampled_from([b"x-request-id", b"content-type", b"content-length", b"x-other"])
HEADERS = st.lists(st.tuples(NAMES, st.binary(max_size=5)), max_size=6)


@given(HEADERS, st.binary(min_size=1, max_size=8))
def test_set_header_is_mutable_headers_setitem(headers, value):
    message = {"type": "http.response.start", "status": 200, "headers": list(headers)}
    expected = {"type": "http.response.start", "status": 200, "headers": list(headers)}
    set_header(message, b"x-request-id", value)
    MutableHeaders(scope=expected)["X-Request-ID"] = value.decode("latin-1")
    assert message == expected
