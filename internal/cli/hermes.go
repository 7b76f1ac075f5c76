package cli

import (
	"path/filepath"

	"github.com/urfave/cli/v3"
)

// hermesHomeEnv names the variable that sets --hermes-home.
const hermesHomeEnv = "CUSTODY_HERMES_HOME"

// hermesHomeFlag is --hermes-home DIR: one setting that makes custody share Hermes's files, for
// the three that would otherwise each have to be given. It stands for
//
//	--ledger DIR/spawn-ledger.json --install-root DIR --tag-env HERMES_SPAWN
//
// and each of those given as a flag overrides its part. Hermes keeps its ledger in its home
// and hashes its project root into the install id; where the two are different directories,
// give --install-root the project root as well.
func hermesHomeFlag(g *globals) cli.Flag {
	return &cli.StringFlag{Name: "hermes-home", Destination: &g.hermesHome, Sources: cli.EnvVars(hermesHomeEnv),
		Usage: "share Hermes's files in DIR: its ledger, install id and tag variable"}
}

// Hermes's names for what custody shares with it.
const (
	hermesLedgerName = "spawn-ledger.json"
	hermesTagEnv     = "HERMES_SPAWN"
)

// ledgerPath is --ledger, else the ledger in --hermes-home, else "" (see ledger.Resolve).
func (g *globals) ledgerPath() string {
	if g.ledger == "" && g.hermesHome != "" {
		return filepath.Join(g.hermesHome, hermesLedgerName)
	}
	return g.ledger
}

// installRootDir is --install-root, else --hermes-home, else "" (the executable's directory).
func (g *globals) installRootDir() string {
	if g.installRoot == "" {
		return g.hermesHome
	}
	return g.installRoot
}

// tagEnvName is --tag-env, else HERMES_SPAWN under --hermes-home, else "" (see tag.EnvName).
func (g *globals) tagEnvName() string {
	if g.tagEnv == "" && g.hermesHome != "" {
		return hermesTagEnv
	}
	return g.tagEnv
}
