package supervise

import (
	"io"
	"os"
	"os/exec"
)

// giveDeathWord gives nothing on macOS: it has no robust futexes, and a supervisor learns of its
// owner's death from the end of its pipe.
func giveDeathWord(*exec.Cmd) (give func()) { return nil }

// ownerPipe is standard input: see giveDeathWord.
func ownerPipe(Config) io.Reader { return os.Stdin }
