"""specbench/cli/common.py: SIGTERM takes Ctrl-C's path while a run is in progress."""

from __future__ import annotations

import os
import signal
import time

import pytest

from specbench.cli.common import sigterm_as_interrupt


def test_sigterm_raises_keyboard_interrupt_and_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode; never reached
    assert signal.getsignal(signal.SIGTERM) is before
