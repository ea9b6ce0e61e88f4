"""A blocking call inside a coroutine freezes the event loop; run_in_executor does not.

A heartbeat task ticks every 10 ms. We make three 0.2 s blocking calls, first
directly in coroutines, then through the loop's default thread pool, and count
how many ticks the loop managed meanwhile.
"""

import asyncio
import time

CALL_SECONDS = 0.2


def blocking_call() -> None:
    time.sleep(CALL_SECONDS)  # stands in for a blocking database driver


async def heartbeat(ticks: list[float]) -> None:
    while True:
        ticks.append(time.monotonic())
        await asyncio.sleep(0.01)


async def three_calls_directly() -> None:
    async def call() -> None:
        blocking_call()  # runs on the loop's own thread: nothing else runs meanwhile

    await asyncio.gather(call(), call(), call())


async def three_calls_in_executor() -> None:
    loop = asyncio.get_running_loop()
    await asyncio.gather(*(loop.run_in_executor(None, blocking_call) for _ in range(3)))


async def measure(label: str, calls) -> tuple[float, int]:
    ticks: list[float] = []
    beating = asyncio.create_task(heartbeat(ticks))
    await asyncio.sleep(0)  # let the heartbeat start
    started = time.monotonic()
    await calls()
    elapsed = time.monotonic() - started
    beating.cancel()
    print(f"{label:<12} {elapsed:.2f} s for three {CALL_SECONDS} s calls, heartbeat ticked {len(ticks)} times")
    return elapsed, len(ticks)


async def main() -> None:
    direct_seconds, direct_ticks = await measure("directly:", three_calls_directly)
    pooled_seconds, pooled_ticks = await measure("in executor:", three_calls_in_executor)
    assert direct_seconds > 2.5 * CALL_SECONDS  # one after another
    assert pooled_seconds < 2 * CALL_SECONDS  # side by side, in three pool threads
    assert pooled_ticks > 5 * direct_ticks  # the loop kept running while the pool waited


asyncio.run(main())
