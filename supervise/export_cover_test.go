package supervise

// The kind-specific covers behind Client.Cover, Reserve and Uncover, for the tests that exercise
// each protocol line on its own.

func (c *Client) Register(g Group) error             { return c.register(g) }
func (c *Client) RegisterCgroup(path string) error   { return c.registerCgroup(path) }
func (c *Client) ReserveCgroup(path string) error    { return c.reserveCgroup(path) }
func (c *Client) Unregister(pgid int) error          { return c.unregister(pgid) }
func (c *Client) UnregisterCgroup(path string) error { return c.unregisterCgroup(path) }
func (o *Outer) Register(g Group) error              { return o.register(g) }
func (o *Outer) Unregister(pgid int) error           { return o.unregister(pgid) }
