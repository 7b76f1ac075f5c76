package scope

import "golang.org/x/sys/windows"

// JobHandle exposes a scope's job handle to the tests.
func JobHandle(s *Scope) windows.Handle { return s.sys.job }

// Threads lists a process's thread ids, as Attach finds them to resume them.
var Threads = threads
