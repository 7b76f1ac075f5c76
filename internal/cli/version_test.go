package cli_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/cli"
)

// TestFormatVersion: a build names its module version, else its VCS revision and commit time,
// else "devel"; the toolchain and platform follow, after the version's one word.
func TestFormatVersion(t *testing.T) {
	platform := []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}
	vcs := func(modified string) []debug.BuildSetting {
		return append([]debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "5e452f3c1a2b3c4d5e6f708192a3b4c5d6e7f809"},
			{Key: "vcs.time", Value: "2026-12-02T00:25:00Z"},
			{Key: "vcs.modified", Value: modified},
		}, platform...)
	}
	for _, tc := range []struct {
		desc string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build information", nil, "devel"},
		{"a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: platform},
			"v1.2.3 (go1.26.8, linux/arm64)"},
		{"a release built in its clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("false")},
			"v1.2.3 (go1.26.8, linux/arm64)"},
		{"a pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202002500-5e452f3c1a2b+dirty"}},
			"v0.0.0-20261202002500-5e452f3c1a2b+dirty (go1.26.8)"},
		{"a revision", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")},
			"devel-5e452f3c1a2b (commit of 2026-12-02T00:25:00Z, go1.26.8, linux/arm64)"},
		{"a revision with changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
			"devel-5e452f3c1a2b-dirty (commit of 2026-12-02T00:25:00Z, go1.26.8, linux/arm64)"},
		{"a short revision, no time", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}},
			"devel-abc"},
		{"go run", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: platform},
			"devel (go1.26.8, linux/arm64)"},
	} {
		if got := cli.FormatVersion(tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// TestVersionCommand: `custody version` and `custody --version` print the same line, which names
// this build as its build information does.
func TestVersionCommand(t *testing.T) {
	bi, _ := debug.ReadBuildInfo()
	want := "custody version " + cli.FormatVersion(bi) + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"--ledger", ledgerPath(t), "version"}} {
		r := runCLI(t, args...)
		if r.code != 0 || r.stderr != "" || r.stdout != want {
			t.Errorf("custody %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
		}
	}
	checkOneLineError(t, "custody version extra", runCLI(t, "version", "extra"), 2)
}
