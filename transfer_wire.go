package custody

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// The redemption's exchange on the giver's socket, one ASCII line each way at a time, at most
// maxLine bytes (a longer line ends the exchange):
//
//	receiver → giver   redeem <secret>
//	giver → receiver   child <JSON: the child's incarnation and scope>   or   refused <reason>
//	receiver → giver   covered        (its receipt is in the ledger and it covers the scope)
//	giver → receiver   released       or   refused <reason>
//
// A receiver that closes the connection instead of sending covered has not completed its
// receipt: the giver keeps the child, and takes its row back if the receiver had written it.
const maxLine = 4096

// readField reads one line and returns what follows verb. A "refused" line becomes an error
// wrapping [ErrGrantRefused] with the peer's reason; another verb, an over-long line or EOF are
// errors too.
func readField(r *bufio.Reader, verb string) (string, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", errors.New("line too long")
	case errors.Is(err, io.EOF):
		return "", errors.New("connection closed")
	case err != nil:
		return "", err
	}
	s := strings.TrimSuffix(string(line), "\n")
	got, rest, _ := strings.Cut(s, " ")
	switch got {
	case verb:
		return rest, nil
	case "refused":
		return "", fmt.Errorf("%w: %s", ErrGrantRefused, rest)
	}
	return "", fmt.Errorf("expected %q, got %q", verb, got)
}

// refuse tells the peer why, on one line.
func refuse(w io.Writer, why string) {
	fmt.Fprintf(w, "refused %s\n", strings.ReplaceAll(why, "\n", " "))
}

// sameSecret compares in constant time, so that the time a refusal takes tells nothing about how
// much of a guess was right.
func sameSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// offer is what the giver says of the child, as JSON on its "child" line: its incarnation and
// its scope's description (see [scope.Desc]).
type offer struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"`
	PidfdID    uint64 `json:"pidfd_id,omitempty"`
	scope.Desc        // its members: "scope", "pgid", "cgroup", "cgroup_id"
	// Job is, on Windows, the value of the handle on the child's job that the giver duplicated
	// into the receiver. adoptScope takes it, and dropOffer closes it on the paths that do not
	// reach adoptScope: a refused receiver must hold no handle keeping the job alive.
	Job uint64 `json:"job,omitempty"`
}

func (o offer) id() procid.ID { return procid.ID{PID: o.PID, Start: o.Start, PidfdID: o.PidfdID} }

func (o offer) desc(leader procid.ID) scope.Desc {
	d := o.Desc
	d.Leader = leader
	return d
}

func parseOffer(s string) (offer, error) {
	var o offer
	if err := json.Unmarshal([]byte(s), &o); err != nil || o.PID <= 1 || o.Start == 0 {
		return o, fmt.Errorf("giver's offer %q: malformed", s) // o: what of it decoded, for dropOffer
	}
	return o, nil
}
