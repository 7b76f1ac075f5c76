package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v3"
)

const completionHelp = `Print a script that completes custody's commands and flags in SHELL (bash, zsh or fish).

  bash:  source <(custody completion bash)              (in ~/.bashrc)
  zsh:   source <(custody completion zsh)               (in ~/.zshrc)
  fish:  custody completion fish > ~/.config/fish/completions/custody.fish

The script is static: it lists the commands and their flags, and leaves what follows run's "--"
to the shell (commands, then files).

EXIT STATUS
  0   the script was printed
  2   no shell, or one custody has no script for`

// newCompletion is `custody completion bash|zsh|fish`. urfave/cli's own completion asks the
// program for candidates by running it with a trailing --generate-shell-completion, which it then
// takes from any command line: `custody run -- prog --generate-shell-completion` would not run
// prog. A static script needs nothing of the sort.
func newCompletion() *cli.Command {
	return &cli.Command{
		Name:         "completion",
		Usage:        "Print a shell completion script (bash, zsh, fish)",
		UsageText:    "custody completion bash|zsh|fish",
		Description:  completionHelp,
		ArgValidator: needArgs("a shell: bash, zsh or fish"),
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.NArg() > 1 {
				return usagef("completion takes one shell, but was given %d arguments", cmd.NArg())
			}
			w, root := cmd.Root().Writer, cmd.Root()
			switch shell := cmd.Args().First(); shell {
			case "bash":
				writeBash(w, root)
			case "zsh":
				fmt.Fprintln(w, "autoload -U +X bashcompinit && bashcompinit")
				writeBash(w, root)
			case "fish":
				writeFish(w, root)
			default:
				return usagef("completion: no script for %q; bash, zsh and fish have one", shell)
			}
			return nil
		},
	}
}

// flagWords lists a command's flags as typed: --name for each name, -x for a one-letter alias.
func flagWords(c *cli.Command, persistent bool) []string {
	var words []string
	for _, f := range c.Flags {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		if pf, ok := f.(cli.LocalFlag); ok && persistent && pf.IsLocal() {
			continue
		}
		for _, n := range f.Names() {
			switch {
			case n == "help" || n == "h" || n == "version" || n == "v": // added once, below
			case len(n) == 1:
				words = append(words, "-"+n)
			default:
				words = append(words, "--"+n)
			}
		}
	}
	if !persistent {
		words = append(words, "--help")
	}
	return words
}

func visibleCommands(root *cli.Command) []*cli.Command {
	var cs []*cli.Command
	for _, c := range root.Commands {
		if !c.Hidden {
			cs = append(cs, c)
		}
	}
	return cs
}

// writeBash writes a bash completion function: the command is the first word that is neither a
// flag nor a flag's value; after run's "--" the shell's own completion takes over.
func writeBash(w io.Writer, root *cli.Command) {
	var names []string
	fmt.Fprintln(w, "_custody() {")
	fmt.Fprintln(w, `  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd="" i`)
	fmt.Fprintln(w, `  case $prev in --ledger|--install-root|--hermes-home) COMPREPLY=($(compgen -f -- "$cur")); return;; esac`)
	fmt.Fprintln(w, `  for ((i = 1; i < COMP_CWORD; i++)); do`)
	fmt.Fprintln(w, `    case ${COMP_WORDS[i]} in`)
	fmt.Fprintln(w, `      --) [[ $cmd == run ]] && { COMPREPLY=($(compgen -c -- "$cur")); [[ $i -lt $((COMP_CWORD-1)) ]] && COMPREPLY=($(compgen -f -- "$cur")); return; };;`)
	fmt.Fprintln(w, `      --ledger|--install-root|--hermes-home|--tag-env|--install|--purpose|--grace|--pid|--host|--port|--owner|--owner-pgid|--parent-pgid|--socket-path) ((i++));;`)
	fmt.Fprintln(w, `      -*) ;;`)
	fmt.Fprintln(w, `      *) [[ -z $cmd ]] && cmd=${COMP_WORDS[i]};;`)
	fmt.Fprintln(w, `    esac`)
	fmt.Fprintln(w, `  done`)
	fmt.Fprintln(w, `  local words`)
	fmt.Fprintln(w, `  case $cmd in`)
	global := strings.Join(flagWords(root, true), " ")
	for _, c := range visibleCommands(root) {
		names = append(names, c.Name)
		words := strings.Join(flagWords(c, false), " ")
		if c.Name == "help" || c.Name == "completion" {
			words = ""
		}
		fmt.Fprintf(w, "    %s) words=%q;;\n", c.Name, words+" "+global)
	}
	fmt.Fprintf(w, "    *) words=%q;;\n", strings.Join(names, " ")+" "+global+" --help --version")
	fmt.Fprintln(w, `  esac`)
	fmt.Fprintln(w, `  [[ $cmd == help ]] && words="`+strings.Join(names, " ")+`"`)
	fmt.Fprintln(w, `  [[ $cmd == completion ]] && words="bash zsh fish"`)
	fmt.Fprintln(w, `  COMPREPLY=($(compgen -W "$words" -- "$cur"))`)
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w, "complete -o default -F _custody custody")
}

// writeFish writes fish completions: the commands while none is given, then each one's flags.
func writeFish(w io.Writer, root *cli.Command) {
	var names []string
	for _, c := range visibleCommands(root) {
		names = append(names, c.Name)
	}
	for _, c := range visibleCommands(root) {
		fmt.Fprintf(w, "complete -c custody -n 'not __fish_seen_subcommand_from %s' -a %s -d %s\n",
			strings.Join(names, " "), c.Name, fishQuote(c.Usage))
		for _, f := range c.Flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			fmt.Fprintf(w, "complete -c custody -n '__fish_seen_subcommand_from %s' -l %s -d %s\n",
				c.Name, f.Names()[0], fishQuote(usageOf(f)))
		}
	}
	for _, f := range root.Flags {
		if n := f.Names()[0]; n == "help" || n == "version" {
			continue // below
		}
		fmt.Fprintf(w, "complete -c custody -l %s -d %s\n", f.Names()[0], fishQuote(usageOf(f)))
	}
	fmt.Fprintln(w, "complete -c custody -l help -d 'show help'")
	fmt.Fprintln(w, "complete -c custody -l version -d 'print the version'")
	fmt.Fprintln(w, "complete -c custody -n '__fish_seen_subcommand_from help' -a '"+strings.Join(names, " ")+"'")
	fmt.Fprintln(w, "complete -c custody -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'")
}

func usageOf(f cli.Flag) string {
	if df, ok := f.(cli.DocGenerationFlag); ok {
		return df.GetUsage()
	}
	return ""
}

// fishQuote quotes s for fish: single quotes, with \ and ' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
