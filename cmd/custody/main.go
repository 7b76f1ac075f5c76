// Command custody is process custody from the command line; see 'custody --help'.
package main

import (
	"os"

	"github.com/custody-dev/custody/internal/cli"
)

func main() { os.Exit(cli.Main()) }
