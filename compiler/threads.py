"""The default thread count, shared by the schedule heuristic and the CPU runtime."""

import os


def default_threads() -> int:
    """AICC_NUM_THREADS when set to an integer, else every core."""
    env = os.environ.get("AICC_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return os.cpu_count() or 1
