package custody

import "testing"

// FailStartAt makes every start of the test fail at the named step after its child started
// ("attach", "handle", "cover", "record"), until the test ends.
func FailStartAt(t testing.TB, step string, err error) {
	startFault = func(s string) error {
		if s == step {
			return err
		}
		return nil
	}
	t.Cleanup(func() { startFault = nil })
}
