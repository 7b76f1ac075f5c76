//go:build !linux

package cli

// containerRecipe: outside Linux and Windows no container exists for custody to make.
const containerRecipe = "this OS offers no container custody can make (cgroups are Linux's, jobs Windows'); " +
	"leave --containment out to run in a process group"
