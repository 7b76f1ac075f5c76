//go:build !linux

package scope

import "context"

func waitAll(ctx context.Context, ss []*Scope) []*Scope { return pollAll(ctx, ss) }
