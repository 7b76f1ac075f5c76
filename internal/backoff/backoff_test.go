package backoff

import (
	"context"
	"errors"
	"testing"
)

func TestUntil(t *testing.T) {
	errBoom := errors.New("boom")
	calls := 0
	third := func() (bool, error) { calls++; return calls == 3, nil }
	if ok, err := Until(context.Background(), third); !ok || err != nil || calls != 3 {
		t.Errorf("true on the third call: ok %v, err %v after %d calls; want true, nil after 3", ok, err, calls)
	}
	if ok, err := Until(context.Background(), func() (bool, error) { return false, errBoom }); ok || err != errBoom {
		t.Errorf("an error: ok %v, err %v; want false, %v", ok, err, errBoom)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := Until(ended, func() (bool, error) { return false, nil }); ok || err != nil {
		t.Errorf("ctx ended, never true: ok %v, err %v; want false, nil", ok, err)
	}
	// The select may take the timer or the ended context first: either way a true counts.
	if ok, err := Until(ended, func() (bool, error) { return true, nil }); !ok || err != nil {
		t.Errorf("ctx ended, true: ok %v, err %v; want true, nil", ok, err)
	}
}
