"""CPython's multiprocessing tests with the 'spawn' start method.

What Lib/test/test_multiprocessing_spawn.py of CPython 3.11 holds; some builds of the test package
leave it out, and spawned children import the test classes from this module by name.
"""

import test._test_multiprocessing

test._test_multiprocessing.install_tests_in_module_dict(globals(), "spawn")
