package sqlparse_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/sqlparse"
)

// shared is one Parser for every test in the package: a Parser is safe for
// concurrent use, and opening one per test would only add DuckDB start-up
// time. Tests that close a Parser open their own.
var shared *sqlparse.Parser

func TestMain(m *testing.M) {
	p, err := sqlparse.Open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "open parser:", err)
		os.Exit(1)
	}
	shared = p
	code := m.Run()
	if err := p.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close parser:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
