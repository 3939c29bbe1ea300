// Command gapless deploys SQL data pipelines without gaps and without lost
// rows. The commands live in package cli; this file only wires the process.
package main

import (
	"os"

	"github.com/gapless-dev/gapless/cli"
)

func main() { os.Exit(cli.Main()) }
