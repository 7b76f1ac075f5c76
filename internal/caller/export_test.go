package caller

// SetHeldHook sets the hook run once a handle is held, before its proof.
func SetHeldHook(f func()) { heldHook = f }
