"""peakline: line-level CPU and memory profiler for Python with a C++ measuring core."""

__version__ = "0.1.0"
