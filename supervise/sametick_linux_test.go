package supervise_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

func init() {
	testproc.Register("pidns-same-tick", testid.InPIDNamespace(testid.Case{Name: "result", Run: sameTickLeader}))
}

// TestSameTickLeader: in a PID namespace, a group leader A is killed and a stranger B is made to
// take its PID, and lead a group with its id, within the tick A started in (asserted). A
// registration of A's group with A's start and pidfs id that arrives now (as a replay to a
// restarted supervisor does) is refused, and the owner's death that follows signals nothing: B
// lives. By start alone, the registration would have bound B's group. And a supervisor that
// covered A's group while A lived (registered with A's start alone, as the legacy and the Hermes
// owner's lines are) signals nothing at the owner's death either: it holds A's group through a
// pidfd on A, which the kernel resolves to A's own, now empty, group, never to B's.
func TestSameTickLeader(t *testing.T) {
	testid.RunInPIDNamespace(t, "pidns-same-tick", []string{"result"})
}

func sameTickLeader([]string) (string, error) {
	var log bytes.Buffer
	cfg := supervise.Config{Grace: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	var sweepA, releaseA func() // a supervisor's cover of A's group, registered while A lived
	s, err := testid.NewSameTick(500, func(a procid.Incarnation) (func(), error) {
		if releaseA != nil {
			releaseA() // a try whose stranger missed the tick
		}
		var pinned bool
		pinned, sweepA, releaseA = supervise.Bound(cfg, fmt.Sprintf("register %d %d %d", a.PID, a.PID, a.Start))
		if !pinned {
			return nil, fmt.Errorf("the registration of live leader %v was not pinned", a.ID)
		}
		return nil, nil
	})
	if err != nil {
		return "", err
	}
	defer s.End()
	sweepA() // the owner of the cover taken while A lived dies
	releaseA()
	if err := s.Lives(); err != nil {
		return "", fmt.Errorf("after the death of the owner that covered A: %w", err)
	}
	a := s.Victim
	line := fmt.Sprintf("register %d %d %d %d\n", a.PID, a.PID, a.Start, a.PidfdID)
	if err := supervise.Serve(context.Background(), strings.NewReader(line), cfg); err != nil {
		return "", fmt.Errorf("serve: %v", err)
	}
	if !strings.Contains(log.String(), "leader pid names another process") {
		return "", fmt.Errorf("the registration was not refused: %q", log.String())
	}
	return s.String(), s.Lives()
}
