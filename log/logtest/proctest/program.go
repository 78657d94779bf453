package proctest

import (
	"fmt"
	"os"
	"testing"
)

// Program returns the program the environment variable env names, as an
// install script printed it. When it is not set or not there, t is
// skipped, or failed under CI=true (where a missing prerequisite is
// never a pass), with install: the command that makes it.
func Program(t testing.TB, env, install string) string {
	t.Helper()
	p := os.Getenv(env)
	msg := ""
	if p == "" {
		msg = env + " is not set"
	} else if _, err := os.Stat(p); err != nil {
		msg = fmt.Sprintf("%s=%s: %v", env, p, err)
	}
	if msg != "" {
		msg += "; make it with: " + install
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}
