package scope

// Carries is the environment block parser of the sweep.
var Carries = carries
