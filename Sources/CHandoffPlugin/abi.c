// The plugin ABI is header-only; this file gives the target something to compile.
#include "handoff_plugin.h"
