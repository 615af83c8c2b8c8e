"""A progress display for long compiles: one line per stage, on a terminal only.

`compile_module` opens a `Progress` for every compile that runs the passes. Nothing is shown
unless standard error is a terminal and the compile is still running after `SHOW_AFTER`
seconds (a small model never prints anything); from then on each stage gets one tqdm line
(the stages that already finished are printed complete first), with its passes as steps and
its time once done. `AICC_PROGRESS=0` turns it off.

    tensor  |########################| 10/10, 0.9 s
    linalg  |########################| 6/6, 0.7 s
    memref  |########################| 5/5, 0.6 s
    loops   |########################| 4/4, 1.1 s
    codegen |                        | 0/1
"""

from __future__ import annotations

import os
import sys
import threading
import time

PROGRESS_ENV = "AICC_PROGRESS"
SHOW_AFTER = 2.0  # seconds a compile runs before its progress shows
_FORMAT = "{desc:<8}|{bar:24}| {n_fmt}/{total_fmt}{postfix}"


def progress_wanted(stream) -> bool:
    """Whether a compile writing to `stream` shows progress: a terminal, not turned off."""
    if os.environ.get(PROGRESS_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


class Progress:
    """The stages of one compile. `stage(name, steps)` starts a line, `step(label)` moves it
    on (label: what runs next), `close()` ends the display; all of it a no-op when off."""

    def __init__(self, stream=None, *, after: float = SHOW_AFTER, enabled: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_wanted(self.stream) if enabled is None else enabled
        self._lock = threading.Lock()
        self._finished: list[tuple[str, int, float]] = []  # before the display showed
        self._stage: list | None = None  # [name, done, steps, start, label]
        self._bar = None
        self._shown = False
        self._timer: threading.Timer | None = None
        if self.enabled:
            self._timer = threading.Timer(after, self._show)
            self._timer.daemon = True
            self._timer.start()

    def stage(self, name: str, steps: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._end_stage()
            self._stage = [name, 0, max(steps, 1), time.perf_counter(), ""]
            if self._shown:
                self._open_bar()

    def step(self, label: str = "") -> None:
        if not self.enabled or self._stage is None:
            return
        with self._lock:
            self._stage[1] += 1
            self._stage[4] = label
            if self._bar is not None:
                self._bar.set_postfix_str(label, refresh=False)
                self._bar.update(1)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._end_stage()
            self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- under the lock

    def _end_stage(self) -> None:
        if self._stage is None:
            return
        name, _, steps, start, _ = self._stage
        seconds = time.perf_counter() - start
        if self._bar is not None:
            self._bar.n = steps
            self._bar.set_postfix_str(f"{seconds:.1f} s", refresh=False)
            self._bar.close()
            self._bar = None
        elif not self._shown:
            self._finished.append((name, steps, seconds))
        self._stage = None

    def _open_bar(self):
        try:
            from tqdm import tqdm
        except ImportError:  # the display is a nicety: no tqdm, no display
            self.enabled = False
            return
        name, done, steps, _, label = self._stage
        self._bar = tqdm(total=steps, initial=done, desc=name, bar_format=_FORMAT,
                         file=self.stream, leave=True, dynamic_ncols=True)
        self._bar.set_postfix_str(label)

    def _show(self) -> None:
        with self._lock:
            if not self.enabled or self._shown:
                return
            try:
                from tqdm import tqdm
            except ImportError:
                self.enabled = False
                return
            self._shown = True
            for name, steps, seconds in self._finished:
                bar = tqdm(total=steps, initial=steps, desc=name, bar_format=_FORMAT,
                           file=self.stream, leave=True, dynamic_ncols=True)
                bar.set_postfix_str(f"{seconds:.1f} s", refresh=False)
                bar.close()
            self._finished.clear()
            if self._stage is not None:
                self._open_bar()


__all__ = ["PROGRESS_ENV", "Progress", "SHOW_AFTER", "progress_wanted"]
