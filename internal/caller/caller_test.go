package caller_test

import (
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
)

func TestMain(m *testing.M) {
	testproc.Main(m)
}
