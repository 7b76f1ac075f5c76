package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/tag"
)

// globals are the flags every command takes.
type globals struct {
	ledger      string
	tagEnv      string
	installRoot string
	stdout      io.Writer
	stderr      io.Writer
}

func (g *globals) open() (*ledger.Ledger, error) {
	p, err := ledger.Resolve(g.ledger)
	if err != nil {
		return nil, err
	}
	return ledger.Open(p), nil
}

func (g *globals) install() string { return tag.Install(g.installRoot) }

func (g *globals) tagName() string { return tag.EnvName(g.tagEnv) }

const rootHelp = `custody makes every long-lived child process positively identified, makes it die
with its owner however the owner dies, signals only through proven authority, and reaps after a
crash only with proof.

The ledger is a JSON file shared by every program of the user (default:
$XDG_STATE_HOME/custody/spawn-ledger.json); --ledger or $CUSTODY_LEDGER names another.

EXIT STATUS
  0   success
  1   the command failed; nothing was changed
  2   bad flags or arguments; nothing was changed
  3   stop or reap: some process was not seen to exit
  11  the ledger lock was held too long by another process; nothing was written`

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "custody",
		Short:         "Process custody: owned, identified, provably stopped child processes",
		Long:          rootHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runnable, so that an unknown command reaches the argument check below as bad input.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.ledger, "ledger", "", "ledger file (default $CUSTODY_LEDGER, else the user's state directory)")
	pf.StringVar(&g.tagEnv, "tag-env", "", "name of the spawn tag variable (default $CUSTODY_TAG_ENV, else CUSTODY_SPAWN)")
	pf.StringVar(&g.installRoot, "install-root", "", "install root whose hash names this install (default: the executable's directory)")
	root.AddCommand(newRun(g), newPs(g), newRegister(g), newStop(g), newReap(g), newSupervise(g), newDoctor(g))
	root.Args = cobra.NoArgs // an unknown command is then bad input, not a failure
	for _, c := range append(root.Commands(), root) {
		c.Args = wrapArgs(c.Args)
	}
	return root
}

// wrapArgs makes positional-argument errors usage errors.
func wrapArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	if check == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
