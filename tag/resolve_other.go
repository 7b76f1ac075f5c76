//go:build !windows

package tag

import (
	"os"
	"path/filepath"
	"strings"
)

// resolve returns the absolute path abs with its symbolic links resolved as Python's
// os.path.realpath(abs, strict=False) resolves them (which Path.resolve calls), step by step:
// a component that does not exist, or cannot be read, is kept as it is, with the rest of the path
// after it; ".." is taken lexically, after the links before it are resolved; a symbolic link
// loop stops the resolution there. filepath.EvalSymlinks instead fails on a missing component,
// and Clean takes ".." before resolving, so either would hash another string than Hermes does.
func resolve(abs string) string {
	p, _ := joinReal("", abs, map[string]*string{})
	return filepath.Clean(p)
}

// joinReal is posixpath._joinrealpath: it appends rest to the resolved path p. ok is false when a
// link loop stopped it.
func joinReal(p, rest string, seen map[string]*string) (string, bool) {
	if strings.HasPrefix(rest, "/") {
		rest, p = rest[1:], "/"
	}
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		switch name {
		case "", ".":
			continue
		case "..":
			if p == "" {
				p = ".."
				continue
			}
			dir, base := split(p)
			p = dir
			if base == ".." {
				p = join(join(dir, ".."), "..")
			}
			continue
		}
		next := join(p, name)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			p = next
			continue
		}
		if r, ok := seen[next]; ok {
			if r != nil {
				p = *r
				continue
			}
			return join(next, rest), false // a loop
		}
		target, err := os.Readlink(next)
		if err != nil {
			p = next
			continue
		}
		seen[next] = nil
		var ok bool
		if p, ok = joinReal(p, target, seen); !ok {
			return join(p, rest), false
		}
		r := p
		seen[next] = &r
	}
	return p, true
}

// join is posixpath.join of two parts: b alone when absolute, no doubled slash.
func join(a, b string) string {
	switch {
	case strings.HasPrefix(b, "/") || a == "":
		return a + b
	case b == "":
		return a // posixpath.join("x", "") is "x/"; callers here never pass an empty b that matters
	case strings.HasSuffix(a, "/"):
		return a + b
	}
	return a + "/" + b
}

// split is posixpath.split: the head keeps no trailing slash unless it is all slashes.
func split(p string) (string, string) {
	i := strings.LastIndex(p, "/") + 1
	head, tail := p[:i], p[i:]
	if head != "" && strings.Trim(head, "/") != "" {
		head = strings.TrimRight(head, "/")
	}
	return head, tail
}
