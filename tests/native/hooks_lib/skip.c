// A stand-in for peakline's own extension module in allocation_hooks_test: StartMemoryHooks
// is told that this object is "self", so this object, not the test executable, is the one
// left unpatched and the test's own malloc calls go through the hooks.
static int pl_hooks_skip_marker(int x) { return x + 1; }

// An address inside this object (a static function: never a PLT entry of the caller).
const void* pl_hooks_skip_address(void) { return (const void*)&pl_hooks_skip_marker; }
