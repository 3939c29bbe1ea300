package trino_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the package's tests with more of them in parallel than
// the default (GOMAXPROCS): they wait on Trino, whose statements take 50
// to 500 ms, far more than they compute. -parallel on the command line
// still wins. Afterwards it fails when a test left a goroutine behind. The HTTP keep-alive connections of
// trinotest's shared admin client (the default transport) and its pool
// live as long as the process and are not leaks.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
