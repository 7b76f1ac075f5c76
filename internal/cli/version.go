package cli

import (
	"context"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v3"
)

// version names the build from what the go command embedded in it.
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi)
}

// formatVersion names a build: its module version when there is one (a release installed with
// `go install …@v1.2.3`, or, since Go 1.24, a build in a clone: a tag, else a pseudo-version
// that holds the commit's time and revision), else the VCS revision (12 hex digits, "-dirty" for
// uncommitted changes) and the commit's time, else "devel". Go records neither under `go run`,
// `go test`, -buildvcs=false, or outside a repository the go command recognises (it looks for a
// .git directory, so not in a linked git worktree, whose .git is a file). The toolchain and the
// platform follow in parentheses: the first word is the version alone, for scripts.
func formatVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	set := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	var about []string
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
		if rev := set["vcs.revision"]; rev != "" {
			v += "-" + rev[:min(len(rev), 12)]
			if set["vcs.modified"] == "true" {
				v += "-dirty"
			}
			if t := set["vcs.time"]; t != "" {
				about = append(about, "commit of "+t)
			}
		}
	}
	if bi.GoVersion != "" {
		about = append(about, bi.GoVersion)
	}
	if set["GOOS"] != "" && set["GOARCH"] != "" {
		about = append(about, set["GOOS"]+"/"+set["GOARCH"])
	}
	if len(about) == 0 {
		return v
	}
	return v + " (" + strings.Join(about, ", ") + ")"
}

// newVersion is `custody version`: what --version prints, as a command too.
func newVersion() *cli.Command {
	return &cli.Command{
		Name:        "version",
		Usage:       "Print the version of this build",
		UsageText:   "custody version",
		Description: versionHelp,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := noArgs(ctx, cmd); err != nil {
				return err
			}
			cli.ShowVersion(cmd.Root())
			return nil
		},
	}
}

const versionHelp = `Print the version of this build, as --version does: the module version (a release, or
the pseudo-version of a build in a clone), else the VCS revision and its commit's time, else
"devel"; then the Go toolchain and the platform it was built for.

EXIT STATUS
  0   the version was printed
  2   an argument was given`
