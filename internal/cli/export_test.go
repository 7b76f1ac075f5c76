package cli

// FormatVersion is formatVersion, for tests of what a build's information prints as.
var FormatVersion = formatVersion
