// Command hello writes one byte and exits: the floor under any Go program's start, against which
// BenchmarkSupervisorStart puts the supervisor's cold start.
package main

import "os"

func main() { os.Stdout.Write([]byte{'R'}) }
