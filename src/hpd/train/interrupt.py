"""A stop that keeps the running update: Ctrl-C or SIGTERM during a training loop finishes the update in flight,
saves a checkpoint at it, then stops as a Ctrl-C (``KeyboardInterrupt``).

Without it a stop lost every update since the last ``checkpoint.every`` boundary: issue 35's DPO cell lost 16 updates
(about 30 minutes) at one session's end. :class:`DeferredStop` is a context manager around the update loop; the loop
asks :meth:`DeferredStop.requested` after each update. A second Ctrl-C stops at once (the updates since the last
checkpoint are lost, as before); further SIGTERMs are ignored, as :func:`hpd.cli.demo.sigterm_as_interrupt` does, so
a repeated ``kill`` cannot cut the save. SIGKILL still ends the process. Outside the main thread (where handlers
cannot be set) it does nothing and the previous behaviour stays.
"""

from __future__ import annotations

import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class DeferredStop:
    """Hold SIGINT / SIGTERM until the running update ends (module doc)."""

    def __init__(self, what: str = "hpd train"):
        self.what = what
        self.signum: int | None = None
        self.saved: dict[int, object] = {}

    def __enter__(self) -> "DeferredStop":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self.saved[s] = signal.getsignal(s)
                signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def _handle(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
            print(f"[{self.what}] {signal.Signals(signum).name}: finishing the running update, then saving a "
                  "checkpoint and stopping (Ctrl-C again stops now, losing the updates since the last checkpoint)",
                  file=sys.stderr, flush=True)
        elif signum == signal.SIGINT:
            self.restore()
            raise KeyboardInterrupt

    def requested(self) -> bool:
        """True once a stop signal arrived."""
        return self.signum is not None

    def restore(self) -> None:
        """Put the previous handlers back; after a SIGTERM stop, further SIGTERMs are ignored (module doc)."""
        for s, h in self.saved.items():
            signal.signal(s, signal.SIG_IGN if (s == signal.SIGTERM and self.signum == signal.SIGTERM) else h)
        self.saved = {}
