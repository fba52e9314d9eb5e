"""SIGTERM arrives, then the main thread blocks in native code before Python could run any
signal handler (peakline_testext.signal_then_block). Unprofiled: killed by SIGTERM in kill().
Under peakline: the profile is written, then the process dies by SIGTERM all the same."""
import signal

import peakline_testext

total = sum(i * i for i in range(300_000))  # LINE work
print("blocking", flush=True)
peakline_testext.signal_then_block(signal.SIGTERM)
print("not reached", flush=True)
