//go:build !unix

package proctest

import "time"

// CPU is not measured here: it returns 0, and cpu-ns/op reads 0.
func CPU() time.Duration { return 0 }
