/* Built with RUNPATH $ORIGIN/plugins: a library that would dlopen its plugin by bare name. */
int peakline_caller_anchor(void) { return 1; }
