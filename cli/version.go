package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// Version is gapless's version. A release build sets it:
//
//	go build -ldflags "-X github.com/gapless-dev/gapless/cli.Version=v1.2.0" ./cmd/gapless
//
// When it is empty the module's version from the build information is
// used (a tagged `go install ...@v1.2.0` has one), else "devel".
var Version = ""

// versionText is what `gapless version` and `gapless --version` print: the
// version with the source revision it was built from, when known, then
// the Go and DuckDB versions.
func versionText() string {
	v, rev := Version, ""
	info, ok := debug.ReadBuildInfo()
	if ok {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		rev = revision(info.Settings)
	}
	if v == "" {
		v = "devel"
	}
	line := "gapless " + v
	if rev != "" {
		line += " (" + rev + ")"
	}
	return fmt.Sprintf("%s\ngo: %s %s/%s\nduckdb: %s\n", line, runtime.Version(), runtime.GOOS, runtime.GOARCH, duckdb.LibraryVersion())
}

// revision is the VCS revision the binary was built from, shortened, with
// its commit time and ", modified" for a dirty tree; "" when not recorded
// (go build -buildvcs=false, or outside a checkout).
func revision(settings []debug.BuildSetting) string {
	var rev, at string
	dirty := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	parts := []string{"revision " + rev[:min(12, len(rev))]}
	if at != "" {
		parts = append(parts, at)
	}
	if dirty {
		parts = append(parts, "modified")
	}
	return strings.Join(parts, ", ")
}

func newVersionCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gapless's version, and the Go and DuckDB versions it was built with",
		Args:  rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}
