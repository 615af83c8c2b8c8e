"""The default thread count, shared by the schedule heuristic and the CPU runtime."""

import os


def count_from_env(name: str) -> int | None:
    """$name as a count (at least 1) when it is set to an integer, else None."""
    env = os.environ.get(name)
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return None


def default_threads() -> int:
    """AICC_NUM_THREADS when set to an integer, else every core."""
    return count_from_env("AICC_NUM_THREADS") or os.cpu_count() or 1
