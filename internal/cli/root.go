package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/tag"
)

// globals are the flags every command takes.
type globals struct {
	ledger      string
	tagEnv      string
	installRoot string
	hermesHome  string // --hermes-home: defaults for the three above (see hermes.go)
	stdout      io.Writer
	stderr      io.Writer
}

func (g *globals) open() (*ledger.Ledger, error) {
	p, err := ledger.Resolve(g.ledgerPath())
	if err != nil {
		return nil, err
	}
	return ledger.Open(p), nil
}

func (g *globals) install() string { return tag.Install(g.installRootDir()) }

// tagName returns the name of the variable to stamp the spawn tag in. It refuses what is not an
// environment name ("A=B" would stamp A with "B=v1:…"), and a name the environment already sets to
// something other than a spawn tag: stamping PATH would replace the child's PATH. A spawn tag
// already there (custody run under a program that custody started) is replaced, as it should be.
func (g *globals) tagName() (string, error) {
	name := tag.EnvName(g.tagEnvName())
	if !tag.ValidEnvName(name) {
		return "", usagef("--tag-env %q: not an environment variable name (letters, digits and _, not starting with a digit)", name)
	}
	if v := os.Getenv(name); v != "" {
		if _, err := tag.Parse(v); err != nil {
			return "", usagef("--tag-env %s: the environment already sets %s to something that is not a spawn tag; custody would overwrite it", name, name)
		}
	}
	return name, nil
}

// nonEmpty refuses an empty flag value: "--ledger ”" (an unset variable in a script, say) must
// not silently mean the default, which is another file. urfave/cli names the flag in the error.
func nonEmpty(v string) error {
	if v == "" {
		return errors.New("empty; leave the flag out for the default")
	}
	return nil
}

// allFlag is ps's and reap's --all, kept so that scripts written when they considered only this
// install's rows by default still run; every install's rows are now the default.
func allFlag() cli.Flag {
	return &cli.BoolFlag{Name: "all", Hidden: true, Usage: "every install's rows (the default)"}
}

// checkPurpose refuses a purpose that cannot be a spawn tag's field, for run and register alike.
func checkPurpose(purpose string) error {
	if purpose == "" || strings.Contains(purpose, ":") {
		return usagef("--purpose %q: must be non-empty and hold no ':' (it is a field of the spawn tag)", purpose)
	}
	return nil
}

const rootHelp = `custody makes every long-lived child process positively identified, makes it die
with its owner however the owner dies, signals only through proven authority, and reaps after a
crash only with proof.

The ledger is a JSON file shared by every program of the user (default:
$XDG_STATE_HOME/custody/spawn-ledger.json); --ledger or $CUSTODY_LEDGER names another.

EXIT STATUS
  0   success
  1   the command failed (the ledger unreadable or not trusted, among others); nothing was
      changed or signalled
  2   bad flags or arguments; nothing was changed
  3   stop or reap: some process was not seen to exit
  4   stop or reap: processes were signalled and seen to exit, but the ledger could not be
      updated afterwards
  5   adopt: the child exited; its status is reported to its parent alone
  11  the ledger lock was held too long by another process; nothing was written`

// The help layouts. urfave/cli renders them through a tabwriter: a flag's String is its names and
// placeholder, a tab, then its usage and default, so each block of flags lines up on its own.
const (
	rootTemplate = `{{.Description}}

Usage:
  custody [flags]
  custody [command]

Available Commands:{{range .Commands}}
  {{.Name}}	{{.Usage}}{{end}}

Flags:{{range .VisibleFlags}}
  {{.String}}{{end}}

Use "custody [command] --help" for more information about a command.
`
	commandTemplate = `{{.Description}}

Usage:
  {{.UsageText}}

Flags:{{range .VisibleFlags}}
  {{.String}}{{end}}{{if .VisiblePersistentFlags}}

Global Flags:{{range .VisiblePersistentFlags}}
  {{.String}}{{end}}{{end}}
`
)

func newRoot(stdout, stderr io.Writer) *cli.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cli.Command{
		Name:        "custody",
		Usage:       "Process custody: owned, identified, provably stopped child processes",
		Description: rootHelp,
		Writer:      stdout,
		ErrWriter:   stderr,
		// Without its own handler urfave/cli calls os.Exit for an error that carries an exit code;
		// report maps errors to exit codes, and only report.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		// The built-in help subcommand would be added to every verb too, where it would take a
		// positional argument: `custody run help` would print help instead of running help. The
		// root gets its own help command instead.
		HideHelpCommand:               true,
		CustomRootCommandHelpTemplate: rootTemplate,
		// Persistent: every command takes them, before or after its name.
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "install-root", Destination: &g.installRoot,
				Usage: "install root whose hash names this install (default: the executable's directory)"},
			&cli.StringFlag{Name: "ledger", Destination: &g.ledger, Validator: nonEmpty,
				Usage: "ledger file (default $CUSTODY_LEDGER, else the user's state directory)"},
			&cli.StringFlag{Name: "tag-env", Destination: &g.tagEnv, Validator: nonEmpty,
				Usage: "name of the spawn tag variable (default $CUSTODY_TAG_ENV, else CUSTODY_SPAWN)"},
			hermesHomeFlag(g),
		},
		Version: version(),
		Commands: []*cli.Command{newAdopt(g), newAgent(g), newCompletion(), newDoctor(g), newHelp(), newPs(g), newReap(g),
			newRegister(g), newRun(g), newStop(g), newSupervise(g), newVersion()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := noArgs(ctx, cmd); err != nil { // an unknown command is bad input, not a failure
				return err
			}
			return cli.ShowRootCommandHelp(cmd)
		},
	}
	root.Walk(func(c *cli.Command) error {
		// A flag error is bad input: exit 2, one line, and no help on stderr.
		c.OnUsageError = func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
			return usagef("%s (see '%s --help')", twoDashes(err.Error()), cmd.FullName())
		}
		// --help followed by an argument that names no subcommand (`custody run --help sh`) asks
		// for the command's own help, not for a missing help topic.
		c.CommandNotFound = func(ctx context.Context, cmd *cli.Command, _ string) { showHelp(ctx, cmd) }
		if c != root {
			c.CustomHelpTemplate = commandTemplate
		}
		return nil
	})
	return root
}

// newHelp is the root's help command: `custody help [command]`.
func newHelp() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "Help about any command",
		UsageText: "custody help [command]",
		Description: `Help provides help for any command in the application.
Simply type custody help [path to command] for full details.`,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			root := cmd.Root()
			topic := cmd.Args().First()
			if topic == "" {
				return showHelp(ctx, root)
			}
			if sub := root.Command(topic); sub != nil {
				return showHelp(ctx, sub)
			}
			return usagef("help: there is no command %q; 'custody help' lists them", topic)
		},
	}
}

// showHelp prints cmd's help on standard output.
func showHelp(ctx context.Context, cmd *cli.Command) error {
	if lineage := cmd.Lineage(); len(lineage) > 1 {
		return cli.ShowCommandHelp(ctx, lineage[1], cmd.Name)
	}
	return cli.ShowRootCommandHelp(cmd)
}

// noArgs refuses positional arguments, in words that say what was wrong.
func noArgs(_ context.Context, cmd *cli.Command) error {
	if cmd.NArg() == 0 {
		return nil
	}
	if cmd.Root() == cmd {
		return usagef("there is no command %q; 'custody help' lists them", cmd.Args().First())
	}
	return usagef("%s takes no arguments, but was given %q (see '%s --help')", cmd.FullName(),
		cmd.Args().First(), cmd.FullName())
}

// needArgs requires at least one positional argument; what says what it is, for the message.
func needArgs(what string) cli.ArgValidatorFunc {
	return func(_ context.Context, cmd *cli.Command) error {
		if cmd.NArg() == 0 {
			return usagef("%s needs %s: %s", cmd.FullName(), what, cmd.UsageText)
		}
		return nil
	}
}

// longFlag is a flag name written with one dash, as Go's flag package writes them in its errors.
var longFlag = regexp.MustCompile(`(^|[\s:])-([A-Za-z][A-Za-z0-9-]+)`)

// twoDashes writes the long flags a parse error names the way custody's help shows them: --grace,
// not -grace.
func twoDashes(msg string) string { return longFlag.ReplaceAllString(msg, "$1--$2") }

// argsAsGiven returns cmd's positional arguments exactly as given, for a command whose flag
// parsing stops at its first positional argument (StopOnNthArg 1), such as run's CMD. What follows
// that argument reaches the action verbatim, except for one token: urfave/cli v3 takes a "--"
// right after it for its own separator and drops it, so `custody run echo -- -n` would run `echo
// -n`. The arguments cmd was given, the tail of its parent's, show whether it did: counted from
// the end, the place of the first argument then holds that "--" instead.
func argsAsGiven(cmd *cli.Command) []string {
	args := cmd.Args().Slice()
	given := cmd.Lineage()[1].Args().Tail()
	if n := len(args); n > 0 && args[0] != "--" && len(given) > n && given[len(given)-n] == "--" {
		return slices.Insert(args, 1, "--")
	}
	return args
}
