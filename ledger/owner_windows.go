package ledger

// checkOwner trusts the directory on Windows: %LocalAppData% carries a per-user ACL, and a path the
// user names explicitly is theirs to choose.
func checkOwner(string) error { return nil }
