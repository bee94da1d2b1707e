package redistest

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns a missing redis-server
// or redis-cli from a skipped test into a failed one, when it is set to "1".
// Continuous integration sets it so that tests cannot silently stop running.
const RequireEnv = "RATELIMIT_REQUIRE_REDIS"

// installHint tells the reader how to get the binaries this package runs.
const installHint = "install it with `apt-get install redis-server redis-tools`"

// Binary returns the path of redis-server. When the binary cannot be found it
// skips the test with a message saying how to install it, unless the
// environment variable RATELIMIT_REQUIRE_REDIS is "1", in which case the test
// fails instead.
func Binary(t testing.TB) string {
	t.Helper()
	return lookBinary(t, "redis-server")
}

// CLIBinary returns the path of redis-cli, which StartCluster needs to create
// a cluster. A missing binary is handled as in Binary.
func CLIBinary(t testing.TB) string {
	t.Helper()
	return lookBinary(t, "redis-cli")
}

// lookBinary finds name on PATH or in /usr/bin, and skips or fails the test
// when it is in neither.
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/bin/" + name; isExecutable(p) {
		return p
	}
	msg := name + " not found on PATH or in /usr/bin; " + installHint
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", msg, RequireEnv)
	}
	t.Skipf("%s (or set %s=1 to fail instead of skipping)", msg, RequireEnv)
	return ""
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
