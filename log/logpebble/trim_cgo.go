//go:build cgo && linux

package logpebble

/*
#include <malloc.h>

#ifdef __GLIBC__
static int provlog_can_trim(void) { return 1; }
static void provlog_trim(void) { malloc_trim(0); }
#else
static int provlog_can_trim(void) { return 0; }
static void provlog_trim(void) {}
#endif
*/
import "C"

// canTrimMalloc reports whether Pebble allocates from a C heap that
// trimMalloc can return memory from: glibc's, with cgo.
func canTrimMalloc() bool { return C.provlog_can_trim() == 1 }

// trimMalloc returns the free pages of every glibc malloc arena to the OS
// (malloc_trim(0)), not only those at the top of the heap.
func trimMalloc() { C.provlog_trim() }
