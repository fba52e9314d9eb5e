# A stand-in that shadows the installed peakline: a worker whose PYTHONPATH starts here
# behaves as one where peakline is not installed (tests/programs/ray_tasks_actor.py).
raise ImportError("No module named 'peakline' (stand-in: peakline is not installed here)")
