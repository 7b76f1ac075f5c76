//go:build unix && !linux

package custody_test

import (
	"testing"
	"time"
)

// floorCgroup returns "": there are no cgroups here.
func floorCgroup(*testing.B) string { return "" }

func floorStartInCgroup(*testing.B, string) time.Duration { panic("no cgroups") }
