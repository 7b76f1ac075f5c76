// Command custody is process custody from the command line; see 'custody --help'.
package main

import (
	"os"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/cli"
)

func main() {
	custody.Init() // first: a copy re-executed as its own supervisor serves and exits here
	os.Exit(cli.Main())
}
