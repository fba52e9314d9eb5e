int peakline_plugin_value(void) { return 42; }
