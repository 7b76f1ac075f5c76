//go:build unix && !linux

package custody_test

import (
	"testing"
	"time"
)

// floorCgroup returns -1: there are no cgroups here.
func floorCgroup(*testing.B) int { return -1 }

func floorStartInCgroup(*testing.B, int) time.Duration { panic("no cgroups") }
