package sockdir

import (
	"os"
	"strings"
)

// eachName calls fn with the name of each entry of the directory tmp that starts with prefix,
// reading the names a batch at a time. macOS gives each user a temporary directory
// of its own (under /var/folders), which holds few files; Linux's is shared and may hold a great
// many, and is read without a string for each (names_linux.go).
func eachName(tmp, prefix string, fn func(name string)) {
	d, err := os.Open(tmp)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if strings.HasPrefix(name, prefix) {
				fn(name)
			}
		}
		if err != nil { // io.EOF at the end
			return
		}
	}
}
